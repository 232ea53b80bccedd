//! Each misfire policy against Quartz 2.3.2's documented outcome (`updateAfterMisfire` of each
//! trigger type).

use jiff::{SignedDuration, Timestamp};

use super::misfire::{DEFAULT_THRESHOLD, MisfirePolicy, Misfired, apply, is_misfired};
use super::{Calendar, CalendarSpec, Schedule, ScheduleSpec};

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn compile(spec: ScheduleSpec) -> Schedule {
    let start = spec.start_time().unwrap();
    Schedule::compile(&spec, start).unwrap()
}

/// Every minute at second 0, from 10:00.
fn cron() -> Schedule {
    compile(ScheduleSpec::Cron {
        cron: "0 * * * * ?".into(),
        time_zone: None,
        start_time: Some(ts("2026-01-01T10:00:00Z")),
        end_time: None,
    })
}

/// Every minute from 10:00, `repeat_count` repeats.
fn simple(repeat_count: i64) -> Schedule {
    compile(ScheduleSpec::Simple {
        interval_ms: 60_000,
        repeat_count,
        start_time: Some(ts("2026-01-01T10:00:00Z")),
        end_time: None,
    })
}

// The trigger was due at 10:02 and has fired twice (10:00, 10:01); it is now 10:05:30.
const DUE: &str = "2026-01-01T10:02:00Z";
const NOW: &str = "2026-01-01T10:05:30Z";

#[test]
fn a_fire_is_misfired_only_beyond_the_threshold() {
    let due = ts(DUE);
    assert!(!is_misfired(
        due,
        due + SignedDuration::from_secs(60),
        DEFAULT_THRESHOLD
    ));
    assert!(is_misfired(
        due,
        due + SignedDuration::from_millis(60_001),
        DEFAULT_THRESHOLD
    ));
}

#[test]
fn cron_fire_now_and_smart_fire_once_now() {
    for policy in [MisfirePolicy::FireNow, MisfirePolicy::Smart] {
        let misfired = apply(&cron(), policy, ts(DUE), 0, None, ts(NOW));
        assert_eq!(misfired.next_fire_time, Some(ts(NOW)), "{policy}");
    }
    // After firing now, the schedule continues from now.
    assert_eq!(
        cron().next_fire_time(ts(NOW), 1, None),
        Some(ts("2026-01-01T10:06:00Z"))
    );
}

#[test]
fn cron_skip_continues_from_the_next_time_after_now() {
    let misfired = apply(&cron(), MisfirePolicy::Skip, ts(DUE), 0, None, ts(NOW));
    assert_eq!(misfired.next_fire_time, Some(ts("2026-01-01T10:06:00Z")));
}

#[test]
fn skip_honours_the_calendar() {
    let calendar = Calendar::compile(&CalendarSpec::Cron {
        cron: "* 6-9 10 * * ?".into(),
        time_zone: None,
        base: None,
    })
    .unwrap();
    let misfired = apply(
        &cron(),
        MisfirePolicy::Skip,
        ts(DUE),
        0,
        Some(&calendar),
        ts(NOW),
    );
    assert_eq!(misfired.next_fire_time, Some(ts("2026-01-01T10:10:00Z")));
}

#[test]
fn fire_all_changes_nothing_so_every_missed_time_fires() {
    let misfired = apply(&cron(), MisfirePolicy::FireAll, ts(DUE), 2, None, ts(NOW));
    assert_eq!(misfired.next_fire_time, Some(ts(DUE)));
    assert_eq!(misfired.times_triggered, 2);
}

#[test]
fn simple_fire_now_once_fires_now() {
    let once = compile(ScheduleSpec::Simple {
        interval_ms: 0,
        repeat_count: 0,
        start_time: Some(ts(DUE)),
        end_time: None,
    });
    for policy in [MisfirePolicy::FireNow, MisfirePolicy::Smart] {
        let misfired = apply(&once, policy, ts(DUE), 0, None, ts(NOW));
        assert_eq!(misfired.next_fire_time, Some(ts(NOW)));
        assert_eq!(misfired.start, ts(DUE), "the start is kept");
    }
}

#[test]
fn simple_reschedule_now_with_existing_count() {
    // 10 repeats, 2 fired: restart now with 8 left; smart means this for a finite repeat count.
    for policy in [
        MisfirePolicy::RescheduleNowWithExistingCount,
        MisfirePolicy::Smart,
    ] {
        let misfired = apply(&simple(10), policy, ts(DUE), 2, None, ts(NOW));
        assert_eq!(
            misfired,
            Misfired {
                next_fire_time: Some(ts(NOW)),
                times_triggered: 0,
                start: ts(NOW),
                repeat_count: Some(8),
            },
            "{policy}"
        );
    }
}

#[test]
fn simple_reschedule_now_with_remaining_count() {
    // Quartz counts the missed slots as whole intervals between the due time and now (3):
    // 10 - (2 fired + 3 missed) = 5 repeats left, from now. fire_now means this when it repeats.
    for policy in [
        MisfirePolicy::RescheduleNowWithRemainingCount,
        MisfirePolicy::FireNow,
    ] {
        let misfired = apply(&simple(10), policy, ts(DUE), 2, None, ts(NOW));
        assert_eq!(
            misfired,
            Misfired {
                next_fire_time: Some(ts(NOW)),
                times_triggered: 0,
                start: ts(NOW),
                repeat_count: Some(5),
            },
            "{policy}"
        );
    }
}

#[test]
fn simple_reschedule_next_with_remaining_count() {
    // Next slot after now is 10:06; the 4 slots 10:02-10:05 count as fired. Smart means this for
    // a trigger that repeats forever; skip means it for simple triggers.
    for (policy, repeat_count) in [
        (MisfirePolicy::RescheduleNextWithRemainingCount, 10),
        (MisfirePolicy::Smart, -1),
        (MisfirePolicy::Skip, 10),
    ] {
        let misfired = apply(&simple(repeat_count), policy, ts(DUE), 2, None, ts(NOW));
        assert_eq!(
            misfired.next_fire_time,
            Some(ts("2026-01-01T10:06:00Z")),
            "{policy}"
        );
        assert_eq!(misfired.times_triggered, 6, "{policy}");
        assert_eq!(misfired.start, ts("2026-01-01T10:00:00Z"));
        assert_eq!(misfired.repeat_count, None);
    }
}

#[test]
fn simple_reschedule_next_with_existing_count() {
    let misfired = apply(
        &simple(10),
        MisfirePolicy::RescheduleNextWithExistingCount,
        ts(DUE),
        2,
        None,
        ts(NOW),
    );
    assert_eq!(misfired.next_fire_time, Some(ts("2026-01-01T10:06:00Z")));
    assert_eq!(misfired.times_triggered, 2);
}

#[test]
fn simple_reschedule_next_past_the_last_slot_completes() {
    // 3 repeats: slots 10:00-10:03; at 10:05:30 none is left.
    let misfired = apply(
        &simple(3),
        MisfirePolicy::RescheduleNextWithRemainingCount,
        ts(DUE),
        2,
        None,
        ts(NOW),
    );
    assert_eq!(misfired.next_fire_time, None);
}

#[test]
fn reschedule_policies_are_for_simple_triggers_only() {
    assert!(
        MisfirePolicy::RescheduleNowWithExistingCount
            .check(&cron())
            .is_err()
    );
    assert!(
        MisfirePolicy::RescheduleNowWithExistingCount
            .check(&simple(3))
            .is_ok()
    );
    assert!(MisfirePolicy::Skip.check(&cron()).is_ok());
}
