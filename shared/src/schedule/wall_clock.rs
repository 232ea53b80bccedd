//! Wall-clock arithmetic in a time zone, as Quartz does it through `java.util.GregorianCalendar`
//! in lenient mode. Calendar-interval and daily-time-interval triggers are defined by this
//! arithmetic, DST quirks included, so we reproduce it rather than "fix" it:
//!
//! - resolving a wall time: inside a spring-forward gap it is read with the offset before the
//!   change (so it moves forward by the gap); inside a fall-back fold it is the later
//!   (standard-time) occurrence;
//! - adding days keeps the wall time of day: computed with the old offset, then corrected by the
//!   change of offset unless that correction changes the date (so a gap moves it *back*, and a
//!   fold keeps the old offset's occurrence);
//! - adding months or years sets the fields, pins the day to the month's length, and resolves.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};

/// The instant of a wall time: gap → offset before the change; fold → the later occurrence.
pub fn resolve(dt: DateTime, zone: &TimeZone) -> Timestamp {
    let offset = match zone.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset,
        AmbiguousOffset::Gap { before, .. } => before,
        AmbiguousOffset::Fold { after, .. } => after,
    };
    offset.to_timestamp(dt).unwrap_or(if dt.year() > 0 {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    })
}

/// The first instant showing a wall time or any later one (a gap: where the gap starts; a fold:
/// its first pass). Where a search may resume without skipping that wall time.
pub fn earliest_instant(dt: DateTime, zone: &TimeZone) -> Timestamp {
    let saturate = if dt.year() > 0 {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    };
    match zone.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } | AmbiguousOffset::Fold { before: offset, .. } => {
            offset.to_timestamp(dt).unwrap_or(saturate)
        }
        // Read with the later offset the wall time is just before the gap: the gap starts at the
        // next transition.
        AmbiguousOffset::Gap { after, .. } => match after.to_timestamp(dt) {
            Ok(before_gap) => zone
                .following(before_gap)
                .next()
                .map_or(before_gap, |transition| transition.timestamp()),
            Err(_) => saturate,
        },
    }
}

/// The wall time of an instant.
pub fn wall(ts: Timestamp, zone: &TimeZone) -> DateTime {
    zone.to_datetime(ts)
}

/// `Calendar.add(DAY_OF_YEAR, days)`.
pub fn add_days(ts: Timestamp, days: i64, zone: &TimeZone) -> Timestamp {
    let old = zone.to_offset(ts);
    let local = old.to_datetime(ts);
    let Ok(date) = local.date().checked_add(jiff::Span::new().days(days)) else {
        return Timestamp::MAX;
    };
    let target = date.to_datetime(local.time());
    let Ok(t1) = old.to_timestamp(target) else {
        return Timestamp::MAX;
    };
    let new = zone.to_offset(t1);
    let difference = old.seconds() - new.seconds();
    if difference != 0 {
        let t2 = t1.saturating_add(SignedDuration::from_secs(i64::from(difference)));
        if let Ok(t2) = t2
            && zone.to_datetime(t2).date() == date
        {
            return t2;
        }
    }
    t1
}

/// `Calendar.add(MONTH, months)`: the day is pinned to the new month's length.
pub fn add_months(ts: Timestamp, months: i64, zone: &TimeZone) -> Timestamp {
    let local = wall(ts, zone);
    let index = i64::from(local.year()) * 12 + i64::from(local.month() - 1) + months;
    let (year, month) = (index.div_euclid(12), index.rem_euclid(12) + 1);
    let Ok(year) = i16::try_from(year) else {
        return Timestamp::MAX;
    };
    let Ok(first) = Date::new(year, month as i8, 1) else {
        return Timestamp::MAX;
    };
    let day = local.day().min(first.days_in_month());
    match Date::new(year, month as i8, day) {
        Ok(date) => resolve(date.to_datetime(local.time()), zone),
        Err(_) => Timestamp::MAX,
    }
}

/// `Calendar.set(HOUR_OF_DAY, hour)` then read back.
pub fn set_hour(ts: Timestamp, hour: i8, zone: &TimeZone) -> Timestamp {
    let local = wall(ts, zone);
    match local.time().with().hour(hour).build() {
        Ok(time) => resolve(local.date().to_datetime(time), zone),
        Err(_) => ts,
    }
}

/// A time of day on the (local) date of `ts`, resolved.
pub fn time_on_date_of(ts: Timestamp, time: Time, zone: &TimeZone) -> Timestamp {
    resolve(wall(ts, zone).date().to_datetime(time), zone)
}

/// A change of a zone's offset from UTC: clocks going forward (a gap: some wall times do not
/// occur) or back (a fold: some occur twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockChange {
    /// The instant of the change.
    pub at: Timestamp,
    /// The wall time just before it (its end: clocks are changed *at* this wall time).
    pub from: DateTime,
    /// The wall time the clocks are set to.
    pub to: DateTime,
}

impl ClockChange {
    /// Whether clocks go forward (wall times from `from` up to `to` do not occur).
    pub fn forward(&self) -> bool {
        self.to > self.from
    }

    /// One line for a person: which wall times do not occur, or occur twice.
    pub fn describe(&self, zone: &str) -> String {
        let hm = |dt: DateTime| dt.strftime("%H:%M").to_string();
        let last_before = |dt: DateTime| {
            dt.checked_sub(SignedDuration::from_secs(1))
                .map_or_else(|_| hm(dt), |d| d.strftime("%H:%M:%S").to_string())
        };
        let length = if self.forward() {
            self.from.duration_until(self.to)
        } else {
            self.to.duration_until(self.from)
        };
        let minutes = length.as_secs() / 60;
        let amount = if minutes % 60 == 0 {
            format!("{} h", minutes / 60)
        } else {
            format!("{minutes} min")
        };
        if self.forward() {
            format!(
                "{} {zone}: clocks go forward {amount} at {} to {}; wall times {}-{} do not occur that day",
                self.from.date(),
                hm(self.from),
                hm(self.to),
                hm(self.from),
                last_before(self.to)
            )
        } else {
            // The repeated wall times are on the day the clocks are set back to (a change at
            // midnight sets them back into the day before).
            format!(
                "{} {zone}: clocks go back {amount} at {} to {}; wall times {}-{} occur twice that day",
                self.to.date(),
                hm(self.from),
                hm(self.to),
                hm(self.to),
                last_before(self.from)
            )
        }
    }
}

/// The zone's clock changes after `from` up to and including `to`, in order.
pub fn clock_changes(zone: &TimeZone, from: Timestamp, to: Timestamp) -> Vec<ClockChange> {
    let mut changes = Vec::new();
    for transition in zone.following(from) {
        let at = transition.timestamp();
        if at > to {
            break;
        }
        let before = at
            .checked_sub(SignedDuration::from_nanos(1))
            .map_or(transition.offset(), |t| zone.to_offset(t));
        let after = transition.offset();
        // An abbreviation-only change (or a zone's first entry) moves no clock.
        if before == after {
            continue;
        }
        changes.push(ClockChange {
            at,
            from: before.to_datetime(at),
            to: after.to_datetime(at),
        });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ny() -> TimeZone {
        TimeZone::get("America/New_York").unwrap()
    }

    #[test]
    fn resolve_moves_gap_forward_and_takes_the_later_fold() {
        let gap: DateTime = "2026-03-08T02:30".parse().unwrap();
        assert_eq!(resolve(gap, &ny()).to_string(), "2026-03-08T07:30:00Z");
        let fold: DateTime = "2026-11-01T01:30".parse().unwrap();
        assert_eq!(resolve(fold, &ny()).to_string(), "2026-11-01T06:30:00Z");
    }

    #[test]
    fn the_earliest_instant_of_a_gap_is_where_it_starts() {
        let gap: DateTime = "2026-03-08T02:30".parse().unwrap();
        assert_eq!(
            earliest_instant(gap, &ny()).to_string(),
            "2026-03-08T07:00:00Z"
        );
        let fold: DateTime = "2026-11-01T01:30".parse().unwrap();
        assert_eq!(
            earliest_instant(fold, &ny()).to_string(),
            "2026-11-01T05:30:00Z"
        );
    }

    #[test]
    fn adding_a_day_into_a_gap_moves_back() {
        // 2026-03-07 02:30 EST + 1 day → 01:30 EST on the spring-forward day.
        let t: Timestamp = "2026-03-07T07:30:00Z".parse().unwrap();
        assert_eq!(add_days(t, 1, &ny()).to_string(), "2026-03-08T06:30:00Z");
        // Ordinary days keep the wall time across the change.
        let t: Timestamp = "2026-03-07T17:00:00Z".parse().unwrap();
        assert_eq!(add_days(t, 2, &ny()).to_string(), "2026-03-09T16:00:00Z");
    }

    #[test]
    fn adding_months_pins_the_day() {
        let utc = TimeZone::UTC;
        let t: Timestamp = "2024-01-31T10:00:00Z".parse().unwrap();
        assert_eq!(add_months(t, 1, &utc).to_string(), "2024-02-29T10:00:00Z");
        assert_eq!(add_months(t, 13, &utc).to_string(), "2025-02-28T10:00:00Z");
    }

    #[test]
    fn clock_changes_name_the_hours_that_are_skipped_and_repeated() {
        let zone = TimeZone::get("America/New_York").unwrap();
        let from: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let to: Timestamp = "2026-12-31T00:00:00Z".parse().unwrap();
        let lines: Vec<String> = super::clock_changes(&zone, from, to)
            .iter()
            .map(|c| c.describe("America/New_York"))
            .collect();
        assert_eq!(
            lines,
            [
                "2026-03-08 America/New_York: clocks go forward 1 h at 02:00 to 03:00; wall times 02:00-02:59:59 do not occur that day",
                "2026-11-01 America/New_York: clocks go back 1 h at 02:00 to 01:00; wall times 01:00-01:59:59 occur twice that day",
            ]
        );
        assert!(super::clock_changes(&TimeZone::UTC, from, to).is_empty());
        // Cairo sets its clocks back at midnight: the repeated hour is the evening before.
        let cairo = TimeZone::get("Africa/Cairo").unwrap();
        let back: Vec<String> = super::clock_changes(
            &cairo,
            "2026-10-01T00:00:00Z".parse().unwrap(),
            "2026-11-30T00:00:00Z".parse().unwrap(),
        )
        .iter()
        .map(|c| c.describe("Africa/Cairo"))
        .collect();
        assert_eq!(
            back,
            [
                "2026-10-29 Africa/Cairo: clocks go back 1 h at 00:00 to 23:00; wall times 23:00-23:59:59 occur twice that day"
            ]
        );
    }
}
