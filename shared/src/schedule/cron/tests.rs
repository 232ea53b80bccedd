use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn fires(expr: &str, zone: &str, start: &str, n: usize) -> Vec<String> {
    let cron = CronExpr::parse(expr).unwrap();
    let zone = TimeZone::get(zone).unwrap();
    let mut out = Vec::new();
    let mut at = cron.next_at_or_after(ts(start), &zone);
    while let Some(t) = at {
        out.push(t.to_string());
        if out.len() == n {
            break;
        }
        at = cron.next_after(t, &zone);
    }
    out
}

#[test]
fn every_second_and_steps() {
    assert_eq!(
        fires("* * * * * ?", "UTC", "2026-01-01T00:00:00.5Z", 2),
        ["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]
    );
    assert_eq!(
        fires("5/20 * * * * ?", "UTC", "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-01T00:00:05Z",
            "2026-01-01T00:00:25Z",
            "2026-01-01T00:00:45Z",
            "2026-01-01T00:01:05Z"
        ]
    );
}

#[test]
fn last_days_and_weekdays() {
    // Last Friday of the month (6L), 10:15 New York.
    assert_eq!(
        fires(
            "0 15 10 ? * 6L",
            "America/New_York",
            "2026-01-01T00:00:00Z",
            2
        ),
        ["2026-01-30T15:15:00Z", "2026-02-27T15:15:00Z"]
    );
    // L-2: third-to-last day; LW: last weekday; 1W on a Saturday is Monday the 3rd.
    assert_eq!(
        fires("0 0 0 L-2 * ?", "UTC", "2026-02-01T00:00:00Z", 1),
        ["2026-02-26T00:00:00Z"]
    );
    assert_eq!(
        fires("0 0 0 LW * ?", "UTC", "2026-05-01T00:00:00Z", 1),
        ["2026-05-29T00:00:00Z"]
    );
    assert_eq!(
        fires("0 0 0 1W * ?", "UTC", "2026-08-01T00:00:00Z", 1),
        ["2026-08-03T00:00:00Z"]
    );
    // Third Monday (2#3).
    assert_eq!(
        fires("0 0 12 ? * 2#3", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-01-19T12:00:00Z"]
    );
}

#[test]
fn ranges_wrap() {
    assert_eq!(
        fires("0 0 22-2 * * ?", "UTC", "2026-01-01T01:30:00Z", 3),
        [
            "2026-01-01T02:00:00Z",
            "2026-01-01T22:00:00Z",
            "2026-01-01T23:00:00Z"
        ]
    );
    // FRI-MON from a Tuesday.
    assert_eq!(
        fires("0 0 0 ? * FRI-MON", "UTC", "2026-01-06T00:00:01Z", 4),
        [
            "2026-01-09T00:00:00Z",
            "2026-01-10T00:00:00Z",
            "2026-01-11T00:00:00Z",
            "2026-01-12T00:00:00Z"
        ]
    );
}

#[test]
fn unix_five_fields_match_either_day() {
    // The 13th or any Friday.
    assert_eq!(
        fires("0 0 13 * 5", "UTC", "2026-02-01T00:00:00Z", 3),
        [
            "2026-02-06T00:00:00Z",
            "2026-02-13T00:00:00Z",
            "2026-02-20T00:00:00Z"
        ]
    );
    // 7 is Sunday too.
    assert_eq!(
        fires("30 6 * * 7", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-01-04T06:30:00Z"]
    );
}

#[test]
fn dst_gap_skips_and_fold_fires_once_later() {
    // 02:30 does not exist in New York on 2026-03-08.
    assert_eq!(
        fires(
            "0 30 2 * * ?",
            "America/New_York",
            "2026-03-07T00:00:00Z",
            2
        ),
        ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"]
    );
    // 01:30 happens twice on 2026-11-01: fire once, at 01:30 EST (06:30Z).
    assert_eq!(
        fires(
            "0 30 1 * * ?",
            "America/New_York",
            "2026-10-31T12:00:00Z",
            2
        ),
        ["2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"]
    );
    // Started at 01:45 EDT, the search goes on from 01:45 EST: 01:30 comes the next day.
    assert_eq!(
        fires(
            "0 30 1 * * ?",
            "America/New_York",
            "2026-11-01T05:45:00Z",
            1
        ),
        ["2026-11-02T06:30:00Z"]
    );
}

#[test]
fn years_and_impossible_dates() {
    assert_eq!(
        fires("0 0 0 29 2 ? 2027-2030", "UTC", "2026-01-01T00:00:00Z", 5),
        ["2028-02-29T00:00:00Z"]
    );
    assert!(fires("0 0 0 30 2 ?", "UTC", "2026-01-01T00:00:00Z", 1).is_empty());
}

#[test]
fn errors_point_at_the_field() {
    let error = CronExpr::parse("0 0 12 32 * ?").unwrap_err().to_string();
    assert_eq!(
        error,
        "cron field 4 (day-of-month): 32 is out of range 1-31"
    );
    let error = CronExpr::parse("0 60 12 * * ?").unwrap_err().to_string();
    assert_eq!(error, "cron field 2 (minute): 60 is out of range 0-59");
    assert!(CronExpr::parse("").is_err());
    assert!(CronExpr::parse("garbage").is_err());
    assert!(CronExpr::parse("0 0 12 * * *").is_err());
    assert!(CronExpr::parse("0 0 12 ? * ?").is_err());
    assert!(CronExpr::parse("0 0 12 ? * MON#6").is_err());
    assert!(CronExpr::parse("0 0 12 ? * FOO").is_err());
    assert!(CronExpr::parse("0/60 0 12 * * ?").is_err());
    // Quartz accepts these: a zero step is no step; a name's trailing text is ignored.
    assert!(CronExpr::parse("0/0 0 12 * * ?").is_ok());
    assert_eq!(
        fires("0 0 1 1 JAN-DEC/3 ?", "UTC", "2026-01-01T12:00:00Z", 2),
        ["2026-02-01T01:00:00Z", "2026-03-01T01:00:00Z"]
    );
}

#[test]
fn a_carry_resets_the_lower_fields() {
    assert_eq!(
        fires("0 0 0/3 ? * *", "UTC", "2027-12-30T23:59:59Z", 2),
        ["2027-12-31T00:00:00Z", "2027-12-31T03:00:00Z"]
    );
}
