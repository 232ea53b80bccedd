use chime_core::schedule::{IntervalUnit, Schedule, ScheduleSpec};
use jiff::Timestamp;
use serde_json::json;

use super::{ALL, fixture};
use crate::blob_triggers::{BlobError, decode};

const BERLIN: Option<&str> = Some("Europe/Berlin");

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

#[test]
fn simple_trigger() {
    let t = decode(fixture!("trigger_simple.ser"), None).unwrap();
    assert_eq!(t.class, "org.quartz.impl.triggers.SimpleTriggerImpl");
    assert_eq!(t.name.as_deref(), Some("simple-1"));
    assert_eq!(t.group.as_deref(), Some("grp"));
    assert_eq!(t.job_name.as_deref(), Some("job-simple-1"));
    assert_eq!(t.job_group.as_deref(), Some("jobs"));
    assert_eq!(
        t.schedule,
        ScheduleSpec::Simple {
            interval_ms: 5_400_000,
            repeat_count: 5,
            start_time: Some(at("2030-03-31T00:00:00Z")),
            end_time: Some(at("2030-04-30T00:00:00Z")),
        }
    );
    assert_eq!(t.times_triggered, 3);
    assert_eq!(t.misfire_instruction, 4);
    assert_eq!(t.priority, 7);
    assert_eq!(t.calendar_name.as_deref(), Some("holidays"));
    assert_eq!(t.description.as_deref(), Some("every 90 minutes"));
    assert_eq!(
        serde_json::Value::Object(t.job_data.data),
        json!({"k": "v", "n": 5})
    );
    assert_eq!(t.next_fire_time, Some(at("2030-03-31T04:30:00Z")));
    assert_eq!(t.previous_fire_time, Some(at("2030-03-31T03:00:00Z")));
}

#[test]
fn cron_triggers_take_the_expressions_zone() {
    let t = decode(fixture!("trigger_cron.ser"), None).unwrap();
    assert_eq!(
        t.schedule,
        ScheduleSpec::Cron {
            cron: "0 30 2 * * ?".into(),
            time_zone: Some("America/New_York".into()),
            start_time: Some(at("2030-03-01T00:00:00Z")),
            end_time: None,
        }
    );
    assert_eq!(t.times_triggered, 0);
    assert_eq!(t.misfire_instruction, 2);
    assert_eq!(t.priority, 5);
    assert_eq!(t.calendar_name, None);
    assert!(t.job_data.data.is_empty());
    assert_eq!(t.next_fire_time, Some(at("2030-03-10T07:30:00Z")));
    assert_eq!(t.previous_fire_time, None);

    let t = decode(fixture!("trigger_cron_ist.ser"), None).unwrap();
    assert_eq!(
        t.schedule,
        ScheduleSpec::Cron {
            cron: "0 0 12 ? * 6#3".into(),
            time_zone: Some("Asia/Kolkata".into()),
            start_time: Some(at("2030-01-01T00:00:00Z")),
            end_time: Some(at("2031-01-01T00:00:00Z")),
        }
    );

    let t = decode(fixture!("trigger_cron_nullzone.ser"), BERLIN).unwrap();
    assert_eq!(
        t.schedule,
        ScheduleSpec::Cron {
            cron: "0 0/7 * * * ? 2030-2031".into(),
            time_zone: Some("Europe/Berlin".into()),
            start_time: Some(at("2030-01-01T00:00:00Z")),
            end_time: None,
        }
    );
    assert_eq!(
        decode(fixture!("trigger_cron_nullzone.ser"), None),
        Err(BlobError::NeedsJvmZone {
            class: "org.quartz.impl.triggers.CronTriggerImpl".into()
        })
    );
}

#[test]
fn calendar_interval_trigger() {
    let t = decode(fixture!("trigger_calint.ser"), None).unwrap();
    assert_eq!(
        t.schedule,
        ScheduleSpec::CalendarInterval {
            interval: 1,
            unit: IntervalUnit::Month,
            time_zone: Some("America/New_York".into()),
            preserve_hour_of_day_across_dst: true,
            skip_day_if_hour_does_not_exist: false,
            start_time: Some(at("2030-01-31T07:30:00Z")),
            end_time: None,
        }
    );
    assert_eq!(t.times_triggered, 2);
    assert_eq!(t.misfire_instruction, 1);
    assert_eq!(t.priority, 3);
    assert_eq!(t.next_fire_time, Some(at("2030-03-31T06:30:00Z")));
    assert_eq!(t.previous_fire_time, Some(at("2030-02-28T07:30:00Z")));
}

#[test]
fn daily_time_interval_trigger_uses_the_jvm_zone() {
    let t = decode(fixture!("trigger_daily.ser"), BERLIN).unwrap();
    assert_eq!(
        t.schedule,
        ScheduleSpec::DailyTimeInterval {
            interval: 20,
            unit: IntervalUnit::Minute,
            start_time_of_day: Some("08:00:00".into()),
            end_time_of_day: Some("10:00:30".into()),
            days_of_week: Some(
                ["MON", "TUE", "WED", "THU", "FRI"]
                    .map(String::from)
                    .to_vec()
            ),
            repeat_count: 30,
            time_zone: Some("Europe/Berlin".into()),
            start_time: Some(at("2030-03-25T00:00:00Z")),
            end_time: Some(at("2030-06-01T00:00:00Z")),
        }
    );
    assert_eq!(t.times_triggered, 4);
    assert_eq!(t.calendar_name.as_deref(), Some("weekdays"));
    assert_eq!(
        serde_json::Value::Object(t.job_data.data),
        json!({"report": "日报"})
    );
    assert_eq!(
        decode(fixture!("trigger_daily.ser"), None),
        Err(BlobError::NeedsJvmZone {
            class: "org.quartz.impl.triggers.DailyTimeIntervalTriggerImpl".into()
        })
    );
}

#[test]
fn subclasses_and_other_classes_are_refused() {
    assert_eq!(
        decode(fixture!("trigger_subclass.ser"), BERLIN),
        Err(BlobError::UnsupportedClass(
            "MakeBlobs$TaggedSimpleTrigger".into()
        ))
    );
    assert_eq!(
        decode(fixture!("cal_weekly_default.ser"), BERLIN),
        Err(BlobError::UnsupportedClass(
            "org.quartz.impl.calendar.WeeklyCalendar".into()
        ))
    );
}

#[test]
fn every_decoded_schedule_compiles() {
    let mut compiled = 0;
    for (name, bytes) in ALL {
        if let Ok(trigger) = decode(bytes, BERLIN) {
            Schedule::compile(&trigger.schedule, Timestamp::UNIX_EPOCH)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            compiled += 1;
        }
    }
    assert_eq!(compiled, 6);
}
