//! Cron expressions in Quartz's syntax (and Unix's five fields), evaluated on jiff.
//!
//! No crate implements Quartz cron, so this is our own. The search runs on
//! local civil time field by field (year, month, day, hour, minute, second), each field a bit set,
//! and turns the civil time found into an instant in the expression's zone:
//!
//! - a civil time inside a spring-forward gap does not exist that day: it does not fire;
//! - a civil time inside a fall-back fold happens twice: it fires once, at its later
//!   (standard-time) occurrence.

mod parse;

pub use parse::{CronError, LAST_YEAR, MAX_YEAR, MIN_YEAR};

use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Timestamp, ToSpan};

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bits 1 (JAN) to 12.
    months: u16,
    days: DayRule,
    years: YearSet,
    /// Plain day-of-week sets as day-of-month masks, by weekday of the 1st and month length
    /// (28-31): a month's matching days are one lookup.
    dow_masks: [[u32; 4]; 7],
}

/// How days are chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DayRule {
    /// Every day.
    Any,
    /// By day of month.
    Dom(DomRule),
    /// By day of week.
    Dow(DowRule),
    /// Unix, both fields restricted: either matches.
    Either(DomRule, DowRule),
}

/// Day-of-month rules; a day matches if any rule does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct DomRule {
    /// Bits 1-31.
    days: u32,
    /// Bit n: the n-th day before the last (`L` is bit 0, `L-3` bit 3).
    last_offsets: u32,
    /// Bit n: `L-nW` (`LW` is bit 0), the weekday nearest the n-th day before the last.
    last_weekdays: u32,
    /// Bit n: `nW`, the weekday nearest the n-th, within the month.
    nearest_weekdays: u32,
}

/// Day-of-week rules (weekday bits 0 = Sunday … 6 = Saturday); a day matches if any rule does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct DowRule {
    days: u8,
    /// `nL`: the last such weekday of the month.
    last: u8,
    /// `n#k`: the k-th such weekday of the month, k = index + 1.
    nth: [u8; 5],
}

/// The years a cron expression fires in (1970 to [`MAX_YEAR`]) as a bit set; later years it
/// names never fire and are not kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct YearSet([u64; 4]);

impl YearSet {
    fn all() -> Self {
        let mut set = Self::default();
        for y in MIN_YEAR..=MAX_YEAR {
            set.insert(y);
        }
        set
    }

    fn insert(&mut self, year: i16) {
        if !(MIN_YEAR..=MAX_YEAR).contains(&year) {
            return;
        }
        let i = (year - MIN_YEAR) as usize;
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// The first year in the set at or after `year`.
    fn next_at_or_after(&self, year: i16) -> Option<i16> {
        let mut i = usize::try_from(year.max(MIN_YEAR) - MIN_YEAR).ok()?;
        while i < 4 * 64 {
            let word = self.0[i / 64] >> (i % 64);
            if word != 0 {
                let found = i + word.trailing_zeros() as usize;
                let year = MIN_YEAR + found as i16;
                return (year <= MAX_YEAR).then_some(year);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }
}

/// The lowest set bit at or above `from`.
#[inline]
fn next_bit(set: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = set >> from;
    (rest != 0).then(|| from + rest.trailing_zeros())
}

fn days_in_month(year: i16, month: u8) -> u8 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Weekday of a date, 0 = Sunday.
fn weekday(year: i16, month: u8, day: u8) -> u8 {
    Date::new(year, month as i8, day as i8)
        .map(|d| d.weekday().to_sunday_zero_offset() as u8)
        .unwrap_or(0)
}

/// The weekday nearest day `n` of a month of `len` days, never leaving the month (`nW`).
///
/// Quartz's quirk for a day past the month's end: it takes the weekday of the date it overflows
/// to, so `31W` in a 30-day month whose next month starts on a Saturday is the 30th (a Friday),
/// and any other overflow finds no day.
fn nearest_weekday(year: i16, month: u8, n: u8, len: u8) -> Option<u8> {
    if n > len {
        let (next_year, next_month) = if month == 12 {
            (year + 1, 1)
        } else {
            (year, month + 1)
        };
        let overflow_weekday = weekday(next_year, next_month, n - len);
        return (overflow_weekday == 6 && n - 1 <= len).then_some(n - 1);
    }
    Some(match weekday(year, month, n) {
        6 if n == 1 => 3,
        6 => n - 1,
        0 if n == len => n - 2,
        0 => n + 1,
        _ => n,
    })
}

/// The zone's spring-forward gaps, as the search needs them (none for a fixed offset).
struct Gaps<'a> {
    zone: Option<&'a TimeZone>,
}

impl<'a> Gaps<'a> {
    fn of(zone: &'a TimeZone) -> Self {
        Self {
            zone: zone.to_fixed_offset().is_err().then_some(zone),
        }
    }

    /// Where a wall time inside a gap is pushed (read with the offset before the gap); None when
    /// it exists.
    fn past_gap(&self, at: Civil) -> Option<Civil> {
        let zone = self.zone?;
        let dt = at.to_datetime()?;
        match zone.to_ambiguous_timestamp(dt).offset() {
            AmbiguousOffset::Gap { before, .. } => {
                let pushed = before.to_timestamp(dt).ok()?;
                Some(Civil::from_datetime(zone.to_datetime(pushed)))
            }
            _ => None,
        }
    }
}

/// A civil time being searched, field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
}

impl Civil {
    fn from_datetime(dt: DateTime) -> Self {
        Self {
            year: dt.year(),
            month: dt.month() as u8,
            day: dt.day() as u8,
            hour: dt.hour() as u8,
            minute: dt.minute() as u8,
            second: dt.second() as u8,
        }
    }

    fn to_datetime(self) -> Option<DateTime> {
        DateTime::new(
            self.year,
            self.month as i8,
            self.day as i8,
            self.hour as i8,
            self.minute as i8,
            self.second as i8,
            0,
        )
        .ok()
    }

    /// The next second (fields may overflow; the search carries them).
    fn plus_one_second(mut self) -> Self {
        self.second += 1;
        self
    }

    /// Turns a field one past its maximum into the next value of the field above (a day past
    /// the month's end is left to the day search, a month past 12 to the year's).
    fn carry(&mut self) {
        if self.second > 59 {
            *self = self.start_of_minute(self.minute + 1);
        }
        if self.minute > 59 {
            *self = self.start_of_hour(self.hour + 1);
        }
        if self.hour > 23 {
            *self = self.start_of_day(self.day + 1);
        }
        if self.month > 12 {
            *self = Self::start_of_year(self.year + 1);
        }
    }

    fn start_of_year(year: i16) -> Self {
        Self {
            year,
            month: 1,
            day: 1,
            hour: 0,
            minute: 0,
            second: 0,
        }
    }

    fn start_of_month(self, month: u8) -> Self {
        Self {
            month,
            day: 1,
            ..self.start_of_day(1)
        }
    }

    fn start_of_day(self, day: u8) -> Self {
        Self {
            day,
            ..self.start_of_hour(0)
        }
    }

    fn start_of_hour(self, hour: u8) -> Self {
        Self {
            hour,
            ..self.start_of_minute(0)
        }
    }

    fn start_of_minute(self, minute: u8) -> Self {
        Self {
            minute,
            second: 0,
            ..self
        }
    }
}

impl CronExpr {
    fn with_dow_masks(mut self) -> Self {
        let days = match &self.days {
            DayRule::Dow(rule) | DayRule::Either(_, rule) => rule.days,
            _ => 0,
        };
        for first in 0..7u8 {
            for len in 28..=31u8 {
                let mut mask = 0u32;
                for day in 1..=len {
                    if days & (1 << ((first + day - 1) % 7)) != 0 {
                        mask |= 1 << day;
                    }
                }
                self.dow_masks[first as usize][(len - 28) as usize] = mask;
            }
        }
        self
    }

    /// The days of `month` that match, as bits 1-31.
    fn day_mask(&self, year: i16, month: u8) -> u32 {
        let len = days_in_month(year, month);
        let valid = ((1u64 << (len + 1)) - 2) as u32;
        match &self.days {
            DayRule::Any => valid,
            DayRule::Dom(dom) => self.dom_mask(dom, year, month, len) & valid,
            DayRule::Dow(dow) => self.dow_mask(dow, year, month, len),
            DayRule::Either(dom, dow) => {
                (self.dom_mask(dom, year, month, len) | self.dow_mask(dow, year, month, len))
                    & valid
            }
        }
    }

    fn dom_mask(&self, rule: &DomRule, year: i16, month: u8, len: u8) -> u32 {
        let mut mask = rule.days;
        let mut offsets = rule.last_offsets;
        while offsets != 0 {
            let n = offsets.trailing_zeros() as u8;
            offsets &= offsets - 1;
            if n < len {
                mask |= 1 << (len - n);
            }
        }
        let mut last_weekdays = rule.last_weekdays;
        while last_weekdays != 0 {
            let n = last_weekdays.trailing_zeros() as u8;
            last_weekdays &= last_weekdays - 1;
            if n < len
                && let Some(day) = nearest_weekday(year, month, len - n, len)
            {
                mask |= 1 << day;
            }
        }
        let mut nearest = rule.nearest_weekdays;
        while nearest != 0 {
            let n = nearest.trailing_zeros() as u8;
            nearest &= nearest - 1;
            if let Some(day) = nearest_weekday(year, month, n, len) {
                mask |= 1 << day;
            }
        }
        mask
    }

    fn dow_mask(&self, rule: &DowRule, year: i16, month: u8, len: u8) -> u32 {
        let first = weekday(year, month, 1);
        let mut mask = self.dow_masks[first as usize][(len - 28) as usize];
        if rule.last != 0 || rule.nth.iter().any(|n| *n != 0) {
            for wd in 0..7u8 {
                let first_day = 1 + (wd + 7 - first) % 7;
                if rule.last & (1 << wd) != 0 {
                    mask |= 1 << (first_day + 7 * ((len - first_day) / 7));
                }
                for (k, set) in rule.nth.iter().enumerate() {
                    let day = first_day + 7 * k as u8;
                    if set & (1 << wd) != 0 && day <= len {
                        mask |= 1 << day;
                    }
                }
            }
        }
        mask
    }

    /// The first civil time at or after `at` matching every field (a field of `at` may be one
    /// past its maximum: the search carries it). None past [`MAX_YEAR`].
    ///
    /// Each field, from the year down, either matches or moves to its next match, which starts
    /// every lower field afresh; a field with no match left carries into the one above.
    ///
    /// Like Quartz, each time a field moves the search visits the wall time with the lower fields
    /// at zero (`H:00:00`, midnight, …); when that wall time falls in a spring-forward gap the
    /// search is pushed past the gap, so a gap that starts mid-hour (Chatham) hides the rest of
    /// that hour.
    fn next_civil(&self, mut at: Civil, zone: &Gaps) -> Option<Civil> {
        loop {
            at.carry();
            let year = self.years.next_at_or_after(at.year)?;
            if year != at.year {
                at = Civil::start_of_year(year);
                if let Some(past) = zone.past_gap(at) {
                    at = past;
                    continue;
                }
            }
            let Some(month) = next_bit(u64::from(self.months), u32::from(at.month)) else {
                at = Civil::start_of_year(at.year + 1);
                continue;
            };
            if month as u8 != at.month {
                at = at.start_of_month(month as u8);
                if let Some(past) = zone.past_gap(at) {
                    at = past;
                    continue;
                }
            }
            let days = self.day_mask(at.year, at.month);
            let Some(day) = next_bit(u64::from(days), u32::from(at.day)) else {
                at = at.start_of_month(at.month + 1);
                continue;
            };
            if day as u8 != at.day {
                at = at.start_of_day(day as u8);
                if let Some(past) = zone.past_gap(at) {
                    at = past;
                    continue;
                }
            }
            // Quartz steps the minute before the hour: moving to the next minute of this hour
            // may land in a gap that starts mid-hour (Chatham) and push the search past it.
            if self.hours & (1 << at.hour) == 0
                && let Some(minute) = next_bit(self.minutes, u32::from(at.minute))
                && minute as u8 != at.minute
                && let Some(past) = zone.past_gap(at.start_of_minute(minute as u8))
            {
                at = past;
                continue;
            }
            let Some(hour) = next_bit(u64::from(self.hours), u32::from(at.hour)) else {
                at = at.start_of_hour(24);
                continue;
            };
            if hour as u8 != at.hour {
                at = at.start_of_hour(hour as u8);
                if let Some(past) = zone.past_gap(at) {
                    at = past;
                    continue;
                }
            }
            let Some(minute) = next_bit(self.minutes, u32::from(at.minute)) else {
                at = at.start_of_minute(60);
                continue;
            };
            if minute as u8 != at.minute {
                at = at.start_of_minute(minute as u8);
                if let Some(past) = zone.past_gap(at) {
                    at = past;
                    continue;
                }
            }
            let Some(second) = next_bit(self.seconds, u32::from(at.second)) else {
                at = at.start_of_minute(at.minute + 1);
                at.carry();
                if let Some(past) = zone.past_gap(at) {
                    at = past;
                }
                continue;
            };
            at.second = second as u8;
            return Some(at);
        }
    }

    /// The first fire time strictly after `after` (whole seconds, as Quartz: `after` is truncated
    /// to the second and the search starts one second later), in `zone`. None when the
    /// expression has no time left before the end of [`MAX_YEAR`].
    pub fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let start = Timestamp::from_second(after.as_second().checked_add(1)?).ok()?;
        // From inside the first (daylight) pass of a fold, the search goes on from the same wall
        // time in the second pass, as Quartz's re-resolution of wall times does.
        let mut at = Civil::from_datetime(zone.to_datetime(start));
        let skipped_month = self.month_skipped_by_rollover(at);
        let gaps = Gaps::of(zone);
        loop {
            let found = self.next_civil(at, &gaps)?;
            if Some((found.year, found.month)) == skipped_month {
                at = found.start_of_month(found.month + 1);
                continue;
            }
            let dt = found.to_datetime()?;
            let offset = match zone.to_ambiguous_timestamp(dt).offset() {
                AmbiguousOffset::Unambiguous { offset } => offset,
                // Skipped by the spring-forward: no fire that day; the search goes on from the
                // time the gap pushes it to.
                AmbiguousOffset::Gap { .. } => {
                    at = gaps.past_gap(found).unwrap_or(found.plus_one_second());
                    continue;
                }
                // Twice: fire at the later, standard-time occurrence.
                AmbiguousOffset::Fold { after, .. } => after,
            };
            match offset.to_timestamp(dt) {
                Ok(ts) if ts >= start => return Some(ts),
                _ => at = found.plus_one_second(),
            }
        }
    }

    /// Quartz's `nW` quirk: a search that starts in a month after its `nW` day rolls over to day
    /// n of the next month; when that month is shorter than n the roll-over lands in the month
    /// after, skipping it (`29W` from late January skips February).
    fn month_skipped_by_rollover(&self, start: Civil) -> Option<(i16, u8)> {
        let DayRule::Dom(rule) = &self.days else {
            return None;
        };
        if rule.days != 0
            || rule.last_offsets != 0
            || rule.last_weekdays != 0
            || rule.nearest_weekdays.count_ones() != 1
        {
            return None;
        }
        let n = rule.nearest_weekdays.trailing_zeros() as u8;
        let len = days_in_month(start.year, start.month);
        let day = nearest_weekday(start.year, start.month, n, len)?;
        let rolls_over = day < start.day || (day == start.day && start.day < len);
        let (year, month) = if start.month == 12 {
            (start.year + 1, 1)
        } else {
            (start.year, start.month + 1)
        };
        (rolls_over && n > days_in_month(year, month)).then_some((year, month))
    }

    /// Whether a wall time satisfies every field (second, minute, hour, day, month, year), without
    /// regard to DST: the check the search must agree with.
    pub fn matches_fields(&self, local: DateTime) -> bool {
        let (year, month, day) = (local.year(), local.month() as u8, local.day() as u8);
        self.seconds & (1 << local.second()) != 0
            && self.minutes & (1 << local.minute()) != 0
            && self.hours & (1 << local.hour()) != 0
            && self.months & (1 << month) != 0
            && self.years.next_at_or_after(year) == Some(year)
            && self.day_mask(year, month) & (1 << day) != 0
    }

    /// The first wall time after `after` (to the second) that does not satisfy every field: where
    /// a cron calendar stops excluding. None if everything up to [`MAX_YEAR`] matches.
    pub fn next_unmatched_after(&self, after: DateTime) -> Option<DateTime> {
        const FULL_SIXTY: u64 = (1 << 60) - 1;
        let mut at = Civil::from_datetime(after).plus_one_second();
        loop {
            at.carry();
            if at.day > days_in_month(at.year, at.month) {
                at = at.start_of_month(at.month + 1);
                continue;
            }
            if at.year > MAX_YEAR {
                return None;
            }
            let local = at.to_datetime()?;
            if !self.matches_fields(local) {
                return Some(local);
            }
            // Everything matches here: skip the largest unit whose every value matches.
            at = if self.seconds != FULL_SIXTY {
                at.plus_one_second()
            } else if self.minutes != FULL_SIXTY {
                at.start_of_minute(at.minute + 1)
            } else if self.hours != (1 << 24) - 1 {
                at.start_of_hour(at.hour + 1)
            } else {
                at.start_of_day(at.day + 1)
            };
        }
    }

    /// The first fire time at or after `at`.
    pub fn next_at_or_after(&self, at: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let before = at.checked_sub(1.second()).ok()?;
        // Sub-second starts: Quartz rounds the start up to the next whole second.
        let floor = Timestamp::from_second(at.as_second()).ok()?;
        let from = if floor == at { before } else { floor };
        self.next_after(from, zone)
    }
}

#[cfg(test)]
mod tests;
