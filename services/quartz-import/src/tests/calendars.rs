use chime_core::schedule::{Calendar, CalendarSpec};
use jiff::Timestamp;

use super::{ALL, fixture};
use crate::calendars::{CalendarError, DecodedCalendar, decode};

const BERLIN: Option<&str> = Some("Europe/Berlin");

fn holiday_ny() -> CalendarSpec {
    // expected.txt: 2030-01-01T05:00Z, 2030-11-03T04:00Z and 2030-12-25T05:00Z are New York
    // midnights; 2030-07-03T22:00Z (a Berlin midnight, added before the zone was set) is not.
    CalendarSpec::Holiday {
        dates: vec![
            "2030-01-01".into(),
            "2030-11-03".into(),
            "2030-12-25".into(),
        ],
        time_zone: Some("America/New_York".into()),
        base: None,
    }
}

const STALE_HOLIDAY: &str = "excluded date 2030-07-03T22:00:00.000Z is not the start of a day \
    in America/New_York (2030-07-03T18:00:00-04:00[America/New_York]), so Quartz never matches \
    it: dropped";

#[test]
fn holiday_dates_in_the_calendar_zone() {
    let decoded = decode(fixture!("cal_holiday_ny.ser"), None).unwrap();
    assert_eq!(decoded.class, "org.quartz.impl.calendar.HolidayCalendar");
    assert_eq!(decoded.spec, holiday_ny());
    assert_eq!(decoded.to_spec(), holiday_ny());
    assert_eq!(decoded.description.as_deref(), Some("US holidays"));
    assert!(decoded.base.is_none());
    assert_eq!(decoded.warnings, [STALE_HOLIDAY]);
}

#[test]
fn weekly_default_uses_the_jvm_zone() {
    let decoded = decode(fixture!("cal_weekly_default.ser"), BERLIN).unwrap();
    assert_eq!(
        decoded.spec,
        CalendarSpec::Weekly {
            excluded_days: vec!["SUN".into(), "SAT".into()],
            time_zone: Some("Europe/Berlin".into()),
            base: None,
        }
    );
    assert_eq!(
        decode(fixture!("cal_weekly_default.ser"), None),
        Err(CalendarError::NeedsJvmZone {
            class: "org.quartz.impl.calendar.WeeklyCalendar".into()
        })
    );
    // The JVM zone may be a Java-only id too.
    let decoded = decode(fixture!("cal_weekly_default.ser"), Some("PST")).unwrap();
    assert!(
        matches!(decoded.spec, CalendarSpec::Weekly { time_zone: Some(z), .. } if z == "America/Los_Angeles")
    );
}

#[test]
fn weekly_with_base_holiday() {
    let decoded = decode(fixture!("cal_weekly_kolkata_base_holiday.ser"), None).unwrap();
    let weekly = CalendarSpec::Weekly {
        excluded_days: vec!["MON".into(), "FRI".into()],
        time_zone: Some("Asia/Kolkata".into()),
        base: None,
    };
    assert_eq!(decoded.spec, weekly);
    assert_eq!(decoded.description.as_deref(), Some("no Mon/Fri in India"));
    assert_eq!(decoded.base.as_ref().unwrap().spec, holiday_ny());
    assert_eq!(
        decoded.to_spec(),
        CalendarSpec::Weekly {
            excluded_days: vec!["MON".into(), "FRI".into()],
            time_zone: Some("Asia/Kolkata".into()),
            base: Some(Box::new(holiday_ny())),
        }
    );
    assert_eq!(
        decoded.all_warnings(),
        [format!("HolidayCalendar: {STALE_HOLIDAY}")]
    );
    assert!(decoded.warnings.is_empty());
}

#[test]
fn monthly_with_a_java_only_zone() {
    let decoded = decode(fixture!("cal_monthly_ist.ser"), None).unwrap();
    assert_eq!(
        decoded.spec,
        CalendarSpec::Monthly {
            excluded_days: vec![1, 15, 31],
            time_zone: Some("Asia/Kolkata".into()),
            base: None,
        }
    );
}

#[test]
fn annual_days_in_each_calendars_own_zone_over_a_three_level_chain() {
    let decoded = decode(fixture!("cal_annual_chain3.ser"), None).unwrap();
    // expected.txt: Berlin 12-25, Auckland 1-1 (31 December in New York, the calendar's zone),
    // New York 2-29, UTC 12-25 again, GMT+05:30 7-14.
    assert_eq!(
        decoded.spec,
        CalendarSpec::Annual {
            excluded_days: vec![
                "01-01".into(),
                "02-29".into(),
                "07-14".into(),
                "12-25".into()
            ],
            time_zone: Some("America/New_York".into()),
            base: None,
        }
    );
    assert_eq!(
        decoded.description.as_deref(),
        Some("annual over weekly over holiday")
    );
    let weekly = decoded.base.as_deref().unwrap();
    assert_eq!(weekly.class, "org.quartz.impl.calendar.WeeklyCalendar");
    let holiday = weekly.base.as_deref().unwrap();
    assert_eq!(holiday.spec, holiday_ny());
    assert!(holiday.base.is_none());
    let CalendarSpec::Annual {
        base: Some(base), ..
    } = decoded.to_spec()
    else {
        panic!("no base");
    };
    let CalendarSpec::Weekly {
        base: Some(base), ..
    } = *base
    else {
        panic!("no second base");
    };
    assert_eq!(*base, holiday_ny());
}

#[test]
fn daily_ranges_with_millis_and_inverted() {
    let decoded = decode(fixture!("cal_daily_millis.ser"), BERLIN).unwrap();
    assert_eq!(
        decoded.spec,
        CalendarSpec::Daily {
            range_start: "09:00:00.250".into(),
            range_end: "17:30:15.999".into(),
            invert: false,
            time_zone: Some("Europe/Berlin".into()),
            base: None,
        }
    );
    assert_eq!(decoded.description.as_deref(), Some("office hours"));

    let decoded = decode(fixture!("cal_daily_inverted_ny.ser"), None).unwrap();
    assert_eq!(
        decoded.spec,
        CalendarSpec::Daily {
            range_start: "08:00:00.000".into(),
            range_end: "18:00:00.000".into(),
            invert: true,
            time_zone: Some("America/New_York".into()),
            base: None,
        }
    );

    let decoded = decode(fixture!("cal_daily_gmt_offset.ser"), None).unwrap();
    assert_eq!(
        decoded.spec,
        CalendarSpec::Daily {
            range_start: "00:00:00.001".into(),
            range_end: "23:59:59.998".into(),
            invert: false,
            time_zone: Some("-08:00".into()),
            base: None,
        }
    );
}

#[test]
fn cron_calendars_take_the_expressions_zone() {
    let decoded = decode(fixture!("cal_cron_kolkata.ser"), BERLIN).unwrap();
    assert_eq!(
        decoded.spec,
        CalendarSpec::Cron {
            cron: "0 * 12-13 ? * MON-FRI".into(),
            time_zone: Some("Asia/Kolkata".into()),
            base: None,
        }
    );
    let decoded = decode(fixture!("cal_cron_nozone.ser"), BERLIN).unwrap();
    assert_eq!(
        decoded.spec,
        CalendarSpec::Cron {
            cron: "0 0 0 L * ?".into(),
            time_zone: Some("Europe/Berlin".into()),
            base: None,
        }
    );
    assert_eq!(decoded.description.as_deref(), Some("month ends"));
    assert!(matches!(
        decode(fixture!("cal_cron_nozone.ser"), None),
        Err(CalendarError::NeedsJvmZone { .. })
    ));
}

#[test]
fn subclasses_other_objects_and_cycles_are_refused() {
    assert_eq!(
        decode(fixture!("cal_subclass.ser"), BERLIN),
        Err(CalendarError::UnsupportedClass(
            "MakeBlobs$MyCalendar".into()
        ))
    );
    assert_eq!(
        decode(fixture!("trigger_simple.ser"), BERLIN),
        Err(CalendarError::UnsupportedClass(
            "org.quartz.impl.triggers.SimpleTriggerImpl".into()
        ))
    );
    assert_eq!(
        decode(fixture!("cal_cycle.ser"), BERLIN),
        Err(CalendarError::ChainTooLong)
    );
    assert!(matches!(
        decode(fixture!("jobdata_props.properties"), BERLIN),
        Err(CalendarError::Serialization(_))
    ));
    assert!(matches!(
        decode(fixture!("cal_weekly_default.ser"), Some("Mars/Olympus")),
        Err(CalendarError::UnknownZone(z)) if z.id == "Mars/Olympus"
    ));
}

/// Every calendar decoded from a fixture compiles in chime, and excludes what Quartz excluded.
#[test]
fn every_decoded_calendar_compiles() {
    let mut compiled = 0;
    for (name, bytes) in ALL {
        if let Ok(decoded) = decode(bytes, BERLIN) {
            Calendar::compile(&decoded.to_spec()).unwrap_or_else(|e| panic!("{name}: {e}"));
            compiled += 1;
        }
    }
    assert_eq!(compiled, 10);

    let chain = decode(fixture!("cal_annual_chain3.ser"), None).unwrap();
    let calendar = Calendar::compile(&chain.to_spec()).unwrap();
    let at = |t: &str| t.parse::<Timestamp>().unwrap();
    // Annual 12-25 in New York.
    assert!(!calendar.is_time_included(at("2031-12-25T12:00:00Z")));
    // Weekly: Monday in Kolkata (Sunday 20:00 in New York, which the annual level is in).
    assert!(!calendar.is_time_included(at("2031-06-16T00:30:00Z")));
    // Holiday 2030-11-03 in New York, a Sunday.
    assert!(!calendar.is_time_included(at("2030-11-03T15:00:00Z")));
    // A Wednesday in June.
    assert!(calendar.is_time_included(at("2031-06-18T12:00:00Z")));
}

#[test]
fn to_spec_of_a_single_level_is_its_spec() {
    let decoded: DecodedCalendar = decode(fixture!("cal_monthly_ist.ser"), None).unwrap();
    assert_eq!(decoded.to_spec(), decoded.spec);
    assert!(decoded.all_warnings().is_empty());
}
