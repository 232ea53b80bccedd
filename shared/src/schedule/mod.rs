//! The schedule engine: when does a trigger fire next (docs/ARCHITECTURE.md, section 4).
//!
//! Pure: no I/O and no clock — "now" is always an argument. The reference is Quartz 2.3.2: the
//! four trigger kinds compute fire times as Quartz's `getFireTimeAfter` does, a calendar skips
//! the candidates it excludes one at a time (as Quartz's `triggered` does, but resuming past a
//! whole excluded range at once), and [`misfire`] applies Quartz's misfire instructions.
//!
//! ```text
//!   ScheduleSpec (JSON) ──compile──▶ Schedule ──first_fire_time──▶ t₀
//!                                        └──next_fire_time(tₙ, n+1)──▶ tₙ₊₁ … (None: complete)
//! ```

pub mod calendar;
pub mod calendar_interval;
pub mod cron;
pub mod daily_time_interval;
pub mod misfire;
#[cfg(test)]
mod misfire_tests;
pub mod simple;
pub mod spec;
mod wall_clock;

pub use calendar::Calendar;
pub use cron::{CronError, CronExpr};
pub use spec::{CalendarSpec, IntervalUnit, ScheduleSpec};
pub use wall_clock::{ClockChange, clock_changes};

use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use calendar_interval::CalendarIntervalSchedule;
use daily_time_interval::DailyTimeIntervalSchedule;
use simple::SimpleSchedule;

/// Past this year nothing fires (triggers other than cron give up their search here).
pub const GIVE_UP_YEAR: i16 = cron::MAX_YEAR + 1;

/// How many excluded candidates a trigger skips before it gives up (a calendar that excludes
/// everything must not hang the scheduler).
const MAX_EXCLUDED_CANDIDATES: usize = 100_000;

/// How many fires [`Schedule::quartz_fire_past_end`] walks towards the end: it jumps to a day
/// before the end unless a repeat count may run out first, so only such a count walks far.
const MAX_PAST_END_STEPS: usize = 5_000_000;

/// A schedule or calendar that cannot be used, saying why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A cron expression does not parse.
    #[error(transparent)]
    Cron(#[from] CronError),
    /// An unknown IANA time zone.
    #[error("unknown time zone {0:?} (use an IANA name such as Europe/London)")]
    TimeZone(String),
    /// Anything else.
    #[error("{0}")]
    Invalid(String),
}

/// A compiled schedule: a trigger kind with its start and end.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// No fire before.
    pub start: Timestamp,
    /// No fire after (cron: inclusive; others: exclusive, as Quartz).
    pub end: Option<Timestamp>,
    /// The kind.
    pub kind: ScheduleKind,
}

/// The four trigger kinds.
#[derive(Debug, Clone)]
pub enum ScheduleKind {
    /// A cron expression in a zone.
    Cron {
        /// The expression.
        expr: Box<CronExpr>,
        /// Its zone.
        zone: TimeZone,
    },
    /// Every interval_ms from the start.
    Simple(SimpleSchedule),
    /// Every n calendar units.
    CalendarInterval(CalendarIntervalSchedule),
    /// Every n units within a daily window.
    DailyTimeInterval(DailyTimeIntervalSchedule),
}

impl Schedule {
    /// Checks a schedule's JSON and compiles it; `default_start` stands in for a missing
    /// `start_time` (the trigger's creation time, or now for a preview).
    pub fn compile(spec: &ScheduleSpec, default_start: Timestamp) -> Result<Self, ScheduleError> {
        let start = spec.start_time().unwrap_or(default_start);
        let end = spec.end_time();
        if let Some(end) = end
            && end < start
        {
            return Err(ScheduleError::Invalid(format!(
                "end_time {end} is before start_time {start}"
            )));
        }
        let kind = match spec {
            ScheduleSpec::Cron {
                cron, time_zone, ..
            } => ScheduleKind::Cron {
                expr: Box::new(CronExpr::parse(cron)?),
                zone: zone(time_zone.as_deref())?,
            },
            ScheduleSpec::Simple {
                interval_ms,
                repeat_count,
                ..
            } => {
                if *repeat_count < -1 {
                    return Err(ScheduleError::Invalid(
                        "repeat_count must be -1 (forever) or more".into(),
                    ));
                }
                if *repeat_count != 0 && *interval_ms < 1 {
                    return Err(ScheduleError::Invalid(
                        "interval_ms must be at least 1 for a repeating trigger".into(),
                    ));
                }
                ScheduleKind::Simple(SimpleSchedule {
                    interval_ms: *interval_ms,
                    repeat_count: *repeat_count,
                })
            }
            ScheduleSpec::CalendarInterval {
                interval,
                unit,
                time_zone,
                preserve_hour_of_day_across_dst,
                skip_day_if_hour_does_not_exist,
                ..
            } => {
                if *interval < 1 {
                    return Err(ScheduleError::Invalid("interval must be at least 1".into()));
                }
                ScheduleKind::CalendarInterval(CalendarIntervalSchedule {
                    interval: *interval,
                    unit: *unit,
                    zone: zone(time_zone.as_deref())?,
                    preserve_hour_of_day: *preserve_hour_of_day_across_dst,
                    skip_day_if_hour_does_not_exist: *skip_day_if_hour_does_not_exist,
                    reached: Default::default(),
                })
            }
            ScheduleSpec::DailyTimeInterval {
                interval,
                unit,
                start_time_of_day,
                end_time_of_day,
                days_of_week,
                repeat_count,
                time_zone,
                ..
            } => {
                let unit_seconds = match unit.seconds() {
                    Some(seconds) => seconds,
                    None => {
                        return Err(ScheduleError::Invalid(
                            "a daily_time_interval unit is second, minute or hour".into(),
                        ));
                    }
                };
                if *interval < 1 {
                    return Err(ScheduleError::Invalid("interval must be at least 1".into()));
                }
                if i64::from(*interval) * unit_seconds > 86_400 {
                    return Err(ScheduleError::Invalid(
                        "a daily_time_interval interval is at most 24 hours".into(),
                    ));
                }
                if *repeat_count < -1 {
                    return Err(ScheduleError::Invalid(
                        "repeat_count must be -1 (forever) or more".into(),
                    ));
                }
                let start_of_day = match start_time_of_day {
                    Some(t) => parse_time_of_day(t)?,
                    None => Time::MIN,
                };
                let end_of_day = match end_time_of_day {
                    Some(t) => parse_time_of_day(t)?,
                    None => Time::constant(23, 59, 59, 0),
                };
                if start_of_day > end_of_day {
                    return Err(ScheduleError::Invalid(format!(
                        "start_time_of_day {start_of_day} is after end_time_of_day {end_of_day}"
                    )));
                }
                let days = match days_of_week {
                    None => 0x7f,
                    Some(days) => {
                        let mut mask = 0u8;
                        for day in days {
                            mask |= 1 << parse_weekday(day)?.to_sunday_zero_offset();
                        }
                        if mask == 0 {
                            return Err(ScheduleError::Invalid("days_of_week names no day".into()));
                        }
                        mask
                    }
                };
                ScheduleKind::DailyTimeInterval(DailyTimeIntervalSchedule {
                    interval: *interval,
                    unit_seconds,
                    start_of_day,
                    end_of_day,
                    days,
                    repeat_count: *repeat_count,
                    zone: zone(time_zone.as_deref())?,
                })
            }
        };
        // Quartz truncates a cron trigger's start to the second.
        let start = match kind {
            ScheduleKind::Cron { .. } => Timestamp::from_second(start.as_second())
                .map_err(|e| ScheduleError::Invalid(e.to_string()))?,
            _ => start,
        };
        Ok(Self { start, end, kind })
    }

    /// The first fire time strictly after `after`, ignoring calendars; `times_triggered` is how
    /// many times the trigger has fired (daily-time-interval and simple triggers stop by it).
    pub fn fire_time_after(&self, after: Timestamp, times_triggered: i64) -> Option<Timestamp> {
        match &self.kind {
            ScheduleKind::Cron { expr, zone } => {
                let after = if self.start > after {
                    self.start.checked_sub(SignedDuration::from_secs(1)).ok()?
                } else {
                    after
                };
                if self.end.is_some_and(|end| after >= end) {
                    return None;
                }
                expr.next_after(after, zone)
                    .filter(|fire| self.end.is_none_or(|end| *fire <= end))
            }
            ScheduleKind::Simple(simple) => {
                simple.fire_time_after(self.start, self.end, after, times_triggered)
            }
            ScheduleKind::CalendarInterval(interval) => {
                interval.fire_time_after(self.start, self.end, after)
            }
            // Quartz checks the end time only when it moves to another day, so it can fire after
            // it within a day; chime never fires after the end time.
            ScheduleKind::DailyTimeInterval(daily) => daily
                .fire_time_after(self.start, self.end, after, times_triggered)
                .filter(|fire| self.end.is_none_or(|end| *fire <= end)),
        }
    }

    /// The trigger's first fire time (at or after its start), skipping excluded times.
    pub fn first_fire_time(&self, calendar: Option<&Calendar>) -> Option<Timestamp> {
        let first = match &self.kind {
            ScheduleKind::Simple(_) | ScheduleKind::CalendarInterval(_) => Some(self.start),
            ScheduleKind::Cron { .. } | ScheduleKind::DailyTimeInterval(_) => {
                let before = self.start.checked_sub(SignedDuration::from_secs(1)).ok()?;
                self.fire_time_after(before, 0)
            }
        };
        self.skip_excluded(first, 0, calendar)
    }

    /// The fire time after the fire at `fired`, once the trigger has fired `times_triggered`
    /// times (counting that fire), skipping excluded times. None: the trigger is complete.
    pub fn next_fire_time(
        &self,
        fired: Timestamp,
        times_triggered: i64,
        calendar: Option<&Calendar>,
    ) -> Option<Timestamp> {
        let next = self.fire_time_after(fired, times_triggered);
        self.skip_excluded(next, times_triggered, calendar)
    }

    /// A daily-time-interval trigger's fire after `after` as Quartz 2.3.2 computes it, passing
    /// over what the calendar excludes as Quartz's `triggered` does; None for the other kinds.
    ///
    /// Unlike [`Self::next_fire_time`] it keeps Quartz's end-time check, which can let a fire
    /// past the end through: Quartz compares the end with the moment after `after` and with the
    /// first moment of a day it moves to, never with the fire it returns (the window's start on
    /// a new day, or a step of the grid within one). chime never fires after a trigger's end
    /// time; the Quartz import, which must fire as Quartz would, uses this to find that fire and
    /// moves the end time to it.
    pub fn quartz_daily_fire_after(
        &self,
        after: Timestamp,
        times_triggered: i64,
        calendar: Option<&Calendar>,
    ) -> Option<Timestamp> {
        let ScheduleKind::DailyTimeInterval(daily) = &self.kind else {
            return None;
        };
        let step =
            |from: Timestamp| daily.fire_time_after(self.start, self.end, from, times_triggered);
        let mut fire = step(after)?;
        let Some(calendar) = calendar else {
            return Some(fire);
        };
        // Quartz steps through what the calendar excludes one candidate at a time. Its end checks
        // can only matter within a day of the end (a fire past the end is found from a candidate
        // less than a day before it), so an excluded stretch is crossed in one jump up to there.
        let near_end = self
            .end
            .and_then(|end| end.checked_sub(SignedDuration::from_hours(26)).ok());
        for _ in 0..MAX_PAST_END_STEPS {
            if calendar.is_time_included(fire) {
                return Some(fire);
            }
            let resume = calendar.resume_after_excluded(fire);
            let past_stretch = resume
                .checked_sub(SignedDuration::from_millis(1))
                .unwrap_or(fire)
                .max(fire);
            fire = match (self.end, near_end) {
                (None, _) => step(past_stretch)?,
                (Some(end), Some(near)) if past_stretch < near => {
                    // None at or before the end past the stretch: Quartz stops before it.
                    step(past_stretch).filter(|f| *f <= end)?
                }
                (Some(end), Some(near)) if fire < near => {
                    // The first candidate after a day before the end is Quartz's next one if
                    // it is at or before the end; past it, Quartz stops first.
                    step(near).filter(|f| *f <= end)?
                }
                _ => step(fire)?,
            };
        }
        None
    }

    /// The fire Quartz 2.3.2 makes after a daily-time-interval trigger's end time, if it makes
    /// one (see [`Self::quartz_daily_fire_after`]), for a trigger whose next fire is `next`
    /// after `times_triggered` fires. After that fire Quartz makes no other: its next search
    /// starts past the end.
    pub fn quartz_fire_past_end(
        &self,
        next: Timestamp,
        times_triggered: i64,
        calendar: Option<&Calendar>,
    ) -> Option<Timestamp> {
        let ScheduleKind::DailyTimeInterval(daily) = &self.kind else {
            return None;
        };
        let end = self.end?;
        // Quartz fires its stored next fire, whatever the end or the calendar.
        let (mut at, mut times) = (next, times_triggered + 1);
        for _ in 0..MAX_PAST_END_STEPS {
            if at > end {
                return Some(at);
            }
            let mut fire = self.quartz_daily_fire_after(at, times, calendar)?;
            // Far from the end, go on from a day before it: without a repeat count running out
            // on the way, the grid there is what Quartz's own walk would reach, as long as the
            // fire found from there is at or before the end (then no end check differs).
            let remaining = daily.repeat_count - times;
            let span = end.duration_since(fire).as_secs();
            let grid = (i64::from(daily.interval) * daily.unit_seconds).max(1);
            // At most the window's grid each day (and one more on a day that repeats an hour).
            let window = daily
                .end_of_day
                .duration_since(daily.start_of_day)
                .as_secs();
            let steps_left = (span / 86_400 + 2) * (window / grid + 2);
            if (daily.repeat_count == -1 || remaining > steps_left)
                && let Some(day_before) = end.checked_sub(SignedDuration::from_hours(24)).ok()
                && fire < day_before
            {
                for back in [24, 8 * 24] {
                    let Ok(from) = end.checked_sub(SignedDuration::from_hours(back)) else {
                        break;
                    };
                    if from <= fire {
                        break;
                    }
                    if let Some(later) = self.quartz_daily_fire_after(from, times, calendar)
                        && later <= end
                    {
                        fire = later;
                        break;
                    }
                }
            }
            (at, times) = (fire, times + 1);
        }
        None
    }

    /// Moves `candidate` on while the calendar excludes it.
    fn skip_excluded(
        &self,
        mut candidate: Option<Timestamp>,
        times_triggered: i64,
        calendar: Option<&Calendar>,
    ) -> Option<Timestamp> {
        let Some(calendar) = calendar else {
            return candidate.filter(|t| within_give_up(*t));
        };
        for _ in 0..MAX_EXCLUDED_CANDIDATES {
            let t = candidate?;
            if !within_give_up(t) {
                return None;
            }
            if calendar.is_time_included(t) {
                return Some(t);
            }
            // Every candidate before `resume` is excluded too: search on from there.
            let resume = calendar.resume_after_excluded(t);
            let from = resume
                .checked_sub(SignedDuration::from_millis(1))
                .unwrap_or(t)
                .max(t);
            candidate = self.fire_time_after(from, times_triggered);
        }
        None
    }

    /// The fire times in `[from, to]`, at most `limit` of them (backfills, and the upstream runs
    /// a dependency `period` window expects). A trigger's repeat count is counted from `from`.
    pub fn fire_times_between(
        &self,
        calendar: Option<&Calendar>,
        from: Timestamp,
        to: Timestamp,
        limit: usize,
    ) -> Vec<Timestamp> {
        let mut fires = Vec::new();
        let mut next = match from.checked_sub(SignedDuration::from_millis(1)) {
            Ok(before) if before >= self.start => self.next_fire_time(before, 0, calendar),
            _ => self.first_fire_time(calendar),
        };
        while let Some(fire) = next {
            if fire > to || fires.len() >= limit {
                break;
            }
            if fire >= from {
                fires.push(fire);
            }
            next = self.next_fire_time(fire, fires.len() as i64 + 1, calendar);
        }
        fires
    }

    /// The next `count` fire times from the start, as Quartz's `TriggerUtils.computeFireTimes`.
    pub fn fire_times(&self, calendar: Option<&Calendar>, count: usize) -> Vec<Timestamp> {
        let mut fires = Vec::with_capacity(count.min(1024));
        let mut next = self.first_fire_time(calendar);
        while let Some(fire) = next {
            if fires.len() >= count {
                break;
            }
            fires.push(fire);
            next = self.next_fire_time(fire, fires.len() as i64, calendar);
        }
        fires
    }
}

/// The most fire times one preview computes.
pub const MAX_PREVIEW: usize = 10_000;

/// The first `count` fire times of a trigger (through an optional calendar), from its start or,
/// without one, from `now`: `chime schedule preview` and `POST /api/v1/schedule/preview`.
///
/// The last Friday of each month at 10:15 in New York, skipping Christmas Eve and New Year's
/// Eve:
///
/// ```
/// use chime_core::schedule::{CalendarSpec, ScheduleSpec, format_fire_time, preview};
///
/// let trigger: ScheduleSpec = serde_json::from_str(
///     r#"{"kind": "cron", "cron": "0 15 10 ? * 6L", "time_zone": "America/New_York"}"#,
/// )?;
/// let holidays: CalendarSpec =
///     serde_json::from_str(r#"{"kind": "annual", "excluded_days": ["12-24", "12-31"],
///                             "time_zone": "America/New_York"}"#)?;
/// let now = "2027-10-01T00:00:00Z".parse()?;
/// let fires = preview(&trigger, Some(&holidays), 3, now)?;
/// let fires: Vec<String> = fires.into_iter().map(format_fire_time).collect();
/// // Friday 31 December 2027 is excluded; New York is on UTC-4 in October, UTC-5 after.
/// assert_eq!(
///     fires,
///     ["2027-10-29T14:15:00.000Z", "2027-11-26T15:15:00.000Z", "2028-01-28T15:15:00.000Z"],
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn preview(
    trigger: &ScheduleSpec,
    calendar: Option<&CalendarSpec>,
    count: usize,
    now: Timestamp,
) -> Result<Vec<Timestamp>, ScheduleError> {
    if count > MAX_PREVIEW {
        return Err(ScheduleError::Invalid(format!(
            "count {count} is more than {MAX_PREVIEW}"
        )));
    }
    let schedule = Schedule::compile(trigger, now)?;
    let calendar = calendar.map(Calendar::compile).transpose()?;
    Ok(schedule.fire_times(calendar.as_ref(), count))
}

/// A fire time as chime prints it: RFC 3339 UTC with milliseconds (`2026-01-01T12:00:00.000Z`).
pub fn format_fire_time(t: Timestamp) -> String {
    format!("{t:.3}")
}

fn within_give_up(t: Timestamp) -> bool {
    t.to_zoned(TimeZone::UTC).year() < GIVE_UP_YEAR
}

/// An IANA zone (default UTC) or a fixed offset.
fn zone(name: Option<&str>) -> Result<TimeZone, ScheduleError> {
    match name {
        None => Ok(TimeZone::UTC),
        Some(name) => named_zone(name).ok_or_else(|| ScheduleError::TimeZone(name.to_string())),
    }
}

/// The zone a schedule's `time_zone` names: an IANA name (`Europe/Berlin`) or a fixed offset
/// from UTC written `+HH:MM` or `-HH:MM` (`+05:30`), which is what a Java zone id such as
/// `GMT+05:30` means and no IANA name does. None if it names neither.
pub fn named_zone(name: &str) -> Option<TimeZone> {
    if let Some(sign) = name.strip_prefix(['+', '-']).map(|_| name.as_bytes()[0]) {
        let hm = &name[1..];
        let (h, m) = hm.split_once(':')?;
        if h.len() != 2 || m.len() != 2 || !(h.bytes().chain(m.bytes())).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
        if h > 18 || m > 59 {
            return None;
        }
        let seconds = (h * 3600 + m * 60) * if sign == b'-' { -1 } else { 1 };
        return Some(TimeZone::fixed(
            jiff::tz::Offset::from_seconds(seconds).ok()?,
        ));
    }
    TimeZone::get(name).ok()
}

/// `HH:MM`, `HH:MM:SS` or `HH:MM:SS.mmm` (no leap second).
fn parse_time_of_day(text: &str) -> Result<Time, ScheduleError> {
    let invalid = || ScheduleError::Invalid(format!("{text:?} is not a time of day (HH:MM[:SS])"));
    let (clock, millis) = match text.split_once('.') {
        Some((clock, millis)) => (clock, Some(millis)),
        None => (text, None),
    };
    let two_digits = |part: &str, max: i8| -> Result<i8, ScheduleError> {
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let value: i8 = part.parse().map_err(|_| invalid())?;
        if value > max {
            Err(invalid())
        } else {
            Ok(value)
        }
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let (hour, minute, second) = match parts.as_slice() {
        [h, m] => (two_digits(h, 23)?, two_digits(m, 59)?, 0),
        [h, m, s] => (two_digits(h, 23)?, two_digits(m, 59)?, two_digits(s, 59)?),
        _ => return Err(invalid()),
    };
    let nanos = match millis {
        Some(m) if m.len() == 3 && m.bytes().all(|b| b.is_ascii_digit()) => {
            m.parse::<i32>().map_err(|_| invalid())? * 1_000_000
        }
        Some(_) => return Err(invalid()),
        None => 0,
    };
    Time::new(hour, minute, second, nanos).map_err(|_| invalid())
}

/// `MON` … `SUN`, any case.
fn parse_weekday(text: &str) -> Result<Weekday, ScheduleError> {
    let day = match text.to_ascii_uppercase().as_str() {
        "SUN" => Weekday::Sunday,
        "MON" => Weekday::Monday,
        "TUE" => Weekday::Tuesday,
        "WED" => Weekday::Wednesday,
        "THU" => Weekday::Thursday,
        "FRI" => Weekday::Friday,
        "SAT" => Weekday::Saturday,
        _ => {
            return Err(ScheduleError::Invalid(format!(
                "{text:?} is not a day of the week (SUN, MON, TUE, WED, THU, FRI, SAT)"
            )));
        }
    };
    Ok(day)
}

#[cfg(test)]
mod zone_tests {
    use super::named_zone;

    #[test]
    fn takes_iana_names_and_fixed_offsets() {
        let at: jiff::Timestamp = "2030-07-01T00:00:00Z".parse().unwrap();
        let offset = |name: &str| named_zone(name).map(|z| z.to_offset(at).seconds());
        assert_eq!(offset("Europe/Berlin"), Some(7200));
        assert_eq!(offset("+05:30"), Some(19800));
        assert_eq!(offset("-08:00"), Some(-28800));
        assert_eq!(offset("+00:00"), Some(0));
        for bad in [
            "+5:30",
            "+05:60",
            "+19:00",
            "05:30",
            "+05",
            "Mars/Olympus",
            "+0a:00",
        ] {
            assert_eq!(offset(bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod past_end_tests {
    use super::{Calendar, CalendarSpec, Schedule, ScheduleSpec};
    use jiff::Timestamp;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// Every 2 hours from 05:00 to 20:00 in Berlin, ending at `end`.
    fn daily(end: &str) -> Schedule {
        let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
            "kind": "daily_time_interval", "interval": 2, "unit": "hour",
            "start_time_of_day": "05:00:00", "end_time_of_day": "20:00:00",
            "time_zone": "Europe/Berlin",
            "start_time": "2030-06-03T00:00:00+02:00", "end_time": end,
        }))
        .unwrap();
        Schedule::compile(&spec, ts("2030-06-03T00:00:00Z")).unwrap()
    }

    #[test]
    fn quartz_fires_once_past_the_end_within_the_ends_day() {
        let schedule = daily("2030-06-05T12:00:00+02:00");
        let next = ts("2030-06-03T03:00:00Z"); // 05:00 Berlin, two days before the end
        // 11:00 is the last fire at or before 12:00; Quartz then fires 13:00, unchecked.
        assert_eq!(
            schedule.quartz_fire_past_end(next, 0, None),
            Some(ts("2030-06-05T11:00:00Z"))
        );
        // The engine itself stops at the end.
        assert_eq!(
            schedule.next_fire_time(ts("2030-06-05T09:00:00Z"), 1, None),
            None
        );
        // A stored next fire already past the end is Quartz's to fire.
        let late = ts("2030-06-05T11:00:00Z");
        assert_eq!(schedule.quartz_fire_past_end(late, 0, None), Some(late));
    }

    #[test]
    fn quartz_passes_an_end_at_midnight_from_the_day_before() {
        // Hourly from 09:00 to Quartz's default 23:59:59: after 23:00 the grid steps to 00:00,
        // which Quartz checks against the end (equal: allowed) before returning 09:00 unchecked.
        let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
            "kind": "daily_time_interval", "interval": 1, "unit": "hour",
            "start_time_of_day": "09:00:00", "end_time_of_day": "23:59:59",
            "time_zone": "Europe/Berlin",
            "start_time": "2030-06-03T00:00:00+02:00", "end_time": "2030-06-10T00:00:00+02:00",
        }))
        .unwrap();
        let schedule = Schedule::compile(&spec, ts("2030-06-03T00:00:00Z")).unwrap();
        assert_eq!(
            schedule.quartz_fire_past_end(ts("2030-06-03T07:00:00Z"), 0, None),
            Some(ts("2030-06-10T07:00:00Z"))
        );
        // The same with a repeat count that does not run out: the same fire.
        let mut counted = spec.clone();
        if let ScheduleSpec::DailyTimeInterval { repeat_count, .. } = &mut counted {
            *repeat_count = 1_000;
        }
        let counted = Schedule::compile(&counted, ts("2030-06-03T00:00:00Z")).unwrap();
        assert_eq!(
            counted.quartz_fire_past_end(ts("2030-06-03T07:00:00Z"), 0, None),
            Some(ts("2030-06-10T07:00:00Z"))
        );
        // A count that runs out first: no fire past the end.
        let mut short = spec;
        if let ScheduleSpec::DailyTimeInterval { repeat_count, .. } = &mut short {
            *repeat_count = 20;
        }
        let short = Schedule::compile(&short, ts("2030-06-03T00:00:00Z")).unwrap();
        assert_eq!(
            short.quartz_fire_past_end(ts("2030-06-03T07:00:00Z"), 0, None),
            None
        );
    }

    /// Saturdays and Sundays excluded, in Berlin.
    fn weekend() -> Calendar {
        let spec: CalendarSpec = serde_json::from_value(serde_json::json!({
            "kind": "weekly", "excluded_days": ["SAT", "SUN"], "time_zone": "Europe/Berlin",
        }))
        .unwrap();
        Calendar::compile(&spec).unwrap()
    }

    /// Quartz's search, one candidate at a time (no jump over excluded stretches).
    fn stepped(
        schedule: &Schedule,
        after: Timestamp,
        times: i64,
        calendar: Option<&Calendar>,
    ) -> Option<Timestamp> {
        let super::ScheduleKind::DailyTimeInterval(daily) = &schedule.kind else {
            return None;
        };
        let mut fire = daily.fire_time_after(schedule.start, schedule.end, after, times)?;
        while calendar.is_some_and(|c| !c.is_time_included(fire)) {
            fire = daily.fire_time_after(schedule.start, schedule.end, fire, times)?;
        }
        Some(fire)
    }

    /// Quartz's walk fire by fire, with no jump.
    fn walked(
        schedule: &Schedule,
        next: Timestamp,
        calendar: Option<&Calendar>,
    ) -> Option<Timestamp> {
        let end = schedule.end?;
        let (mut at, mut times) = (next, 1);
        loop {
            if at > end {
                return Some(at);
            }
            at = stepped(schedule, at, times, calendar)?;
            times += 1;
        }
    }

    #[test]
    fn an_excluded_weekend_is_crossed_as_quartz_crosses_it() {
        // Every 45 s from 09:00 to 23:59:59 with a weekend calendar: a weekend of excluded
        // candidates between Friday night and an end on or around it.
        let weekend = weekend();
        for end in [
            "2030-06-10T00:00:00+02:00",
            "2030-06-09T23:59:55+02:00",
            "2030-06-10T08:00:00+02:00",
            "2030-06-10T09:00:05+02:00",
            "2030-06-09T12:00:00+02:00",
            "2030-06-08T09:00:00+02:00",
        ] {
            let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
                "kind": "daily_time_interval", "interval": 45, "unit": "second",
                "start_time_of_day": "09:00:00", "end_time_of_day": "23:59:59",
                "time_zone": "Europe/Berlin",
                "start_time": "2030-06-03T00:00:00+02:00", "end_time": end,
            }))
            .unwrap();
            let schedule = Schedule::compile(&spec, ts("2030-06-03T00:00:00Z")).unwrap();
            // Saturday 10:00 (a misfired do-nothing trigger searching from now), and Friday.
            for from in ["2030-06-08T08:00:00Z", "2030-06-07T20:00:00Z"] {
                let from = ts(from);
                assert_eq!(
                    schedule.quartz_daily_fire_after(from, 1, Some(&weekend)),
                    stepped(&schedule, from, 1, Some(&weekend)),
                    "end {end}, from {from}"
                );
                assert_eq!(
                    schedule.quartz_fire_past_end(from, 0, Some(&weekend)),
                    walked(&schedule, from, Some(&weekend)),
                    "end {end}, from {from}"
                );
            }
        }
    }

    #[test]
    fn the_jump_towards_the_end_finds_what_walking_every_fire_finds() {
        let weekend = weekend();
        let shapes = [
            (2, "hour", "05:00:00", "20:00:00", None),
            (1, "hour", "09:00:00", "23:59:59", None),
            (
                45,
                "minute",
                "00:00:00",
                "23:59:59",
                Some(vec!["MON", "THU"]),
            ),
            (7, "hour", "01:30:00", "23:00:00", None),
        ];
        for (interval, unit, from, to, days) in shapes {
            // Ends every 37 minutes over nine days, across the EU autumn change.
            for step in 0..(9 * 24 * 60 / 37) {
                let end = ts("2030-10-21T00:00:00Z") + jiff::SignedDuration::from_mins(37 * step);
                let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
                    "kind": "daily_time_interval", "interval": interval, "unit": unit,
                    "start_time_of_day": from, "end_time_of_day": to, "days_of_week": days,
                    "time_zone": "Europe/Berlin",
                    "start_time": "2030-10-14T00:00:00+02:00", "end_time": end.to_string(),
                }))
                .unwrap();
                let schedule = Schedule::compile(&spec, ts("2030-10-14T00:00:00Z")).unwrap();
                let Some(next) = schedule.first_fire_time(None) else {
                    continue;
                };
                for calendar in [None, Some(&weekend)] {
                    assert_eq!(
                        schedule.quartz_fire_past_end(next, 0, calendar),
                        walked(&schedule, next, calendar),
                        "{spec:?} {}",
                        calendar.is_some()
                    );
                }
            }
        }
    }

    #[test]
    fn no_fire_past_an_end_reached_from_another_day_or_excluded() {
        // The end falls after the day's window: the next fire is found on the next day, and
        // Quartz checks that one against the end.
        let after_window = daily("2030-06-05T19:30:00+02:00");
        assert_eq!(
            after_window.quartz_fire_past_end(ts("2030-06-03T03:00:00Z"), 0, None),
            None
        );
        // The end before the day's first fire: reached from the day before, checked.
        let before_window = daily("2030-06-05T04:00:00+02:00");
        assert_eq!(
            before_window.quartz_fire_past_end(ts("2030-06-03T03:00:00Z"), 0, None),
            None
        );
        // A calendar excluding the fire past the end: Quartz skips it and stops.
        let calendar: CalendarSpec = serde_json::from_value(serde_json::json!({
            "kind": "daily", "range_start": "12:30", "range_end": "14:00",
            "time_zone": "Europe/Berlin",
        }))
        .unwrap();
        let calendar = Calendar::compile(&calendar).unwrap();
        let schedule = daily("2030-06-05T12:00:00+02:00");
        assert_eq!(
            schedule.quartz_fire_past_end(ts("2030-06-03T03:00:00Z"), 0, Some(&calendar)),
            None
        );
    }
}
