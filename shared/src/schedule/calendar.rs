//! Exclusion calendars: a time they exclude never fires. Quartz's semantics, quirks included (a
//! non-inverted daily range also excludes midnight and 23:59:59.999; both range ends are
//! excluded). A calendar may chain a `base`: a time is excluded if either excludes it.

use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::cron::CronExpr;
use super::spec::CalendarSpec;
use super::wall_clock::{earliest_instant, time_on_date_of, wall};
use super::{ScheduleError, parse_time_of_day, parse_weekday, zone};

/// A compiled calendar.
#[derive(Debug, Clone)]
pub struct Calendar {
    rule: Rule,
    zone: TimeZone,
    base: Option<Box<Calendar>>,
}

#[derive(Debug, Clone)]
enum Rule {
    Holiday(Vec<Date>),
    /// Bit n: weekday n (0 = Sunday) excluded.
    Weekly(u8),
    /// Bit n: day n excluded.
    Monthly(u32),
    /// (month, day) pairs.
    Annual(Vec<(i8, i8)>),
    Daily {
        start: Time,
        end: Time,
        invert: bool,
    },
    Cron(Box<CronExpr>),
}

const MIDNIGHT: Time = Time::MIN;
const ALL_DAYS: u32 = 0xFFFF_FFFE;
const LAST_MILLI: Time = Time::constant(23, 59, 59, 999_000_000);

impl Calendar {
    /// Checks a calendar's JSON and compiles it.
    pub fn compile(spec: &CalendarSpec) -> Result<Self, ScheduleError> {
        let (rule, time_zone, base) = match spec {
            CalendarSpec::Holiday {
                dates,
                time_zone,
                base,
            } => {
                let mut parsed = dates
                    .iter()
                    .map(|d| {
                        d.parse::<Date>().map_err(|_| {
                            ScheduleError::Invalid(format!(
                                "holiday {d:?} is not a date (YYYY-MM-DD)"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                parsed.sort();
                (Rule::Holiday(parsed), time_zone, base)
            }
            CalendarSpec::Weekly {
                excluded_days,
                time_zone,
                base,
            } => {
                let mut mask = 0u8;
                for day in excluded_days {
                    mask |= 1 << parse_weekday(day)?.to_sunday_zero_offset();
                }
                (Rule::Weekly(mask), time_zone, base)
            }
            CalendarSpec::Monthly {
                excluded_days,
                time_zone,
                base,
            } => {
                let mut mask = 0u32;
                for day in excluded_days {
                    if !(1..=31).contains(day) {
                        return Err(ScheduleError::Invalid(format!(
                            "monthly calendar: day {day} is out of range 1-31"
                        )));
                    }
                    mask |= 1 << day;
                }
                (Rule::Monthly(mask), time_zone, base)
            }
            CalendarSpec::Annual {
                excluded_days,
                time_zone,
                base,
            } => {
                let days = excluded_days
                    .iter()
                    .map(|d| parse_month_day(d))
                    .collect::<Result<Vec<_>, _>>()?;
                (Rule::Annual(days), time_zone, base)
            }
            CalendarSpec::Daily {
                range_start,
                range_end,
                invert,
                time_zone,
                base,
            } => {
                let start = parse_time_of_day(range_start)?;
                let end = parse_time_of_day(range_end)?;
                if start >= end {
                    return Err(ScheduleError::Invalid(format!(
                        "daily calendar: range_start {range_start} must be before range_end {range_end}"
                    )));
                }
                (
                    Rule::Daily {
                        start,
                        end,
                        invert: *invert,
                    },
                    time_zone,
                    base,
                )
            }
            CalendarSpec::Cron {
                cron,
                time_zone,
                base,
            } => (
                Rule::Cron(Box::new(CronExpr::parse(cron)?)),
                time_zone,
                base,
            ),
        };
        Ok(Self {
            rule,
            zone: zone(time_zone.as_deref())?,
            base: base
                .as_deref()
                .map(Calendar::compile)
                .transpose()?
                .map(Box::new),
        })
    }

    /// Whether `t` may fire.
    pub fn is_time_included(&self, t: Timestamp) -> bool {
        if let Some(base) = &self.base
            && !base.is_time_included(t)
        {
            return false;
        }
        self.own_includes(t)
    }

    fn own_includes(&self, t: Timestamp) -> bool {
        match &self.rule {
            Rule::Weekly(mask) => {
                *mask != 0x7f
                    && mask & (1 << wall(t, &self.zone).weekday().to_sunday_zero_offset()) == 0
            }
            Rule::Monthly(mask) => {
                // Quartz: a calendar that excludes every day includes nothing.
                *mask != ALL_DAYS && mask & (1 << wall(t, &self.zone).day()) == 0
            }
            Rule::Holiday(dates) => dates.binary_search(&wall(t, &self.zone).date()).is_err(),
            Rule::Annual(days) => {
                let local = wall(t, &self.zone);
                !days.contains(&(local.month(), local.day()))
            }
            Rule::Daily { start, end, invert } => {
                let on_day = |time: Time| time_on_date_of(t, time, &self.zone);
                let (s, e) = (on_day(*start), on_day(*end));
                if *invert {
                    s <= t && t <= e
                } else {
                    let (d0, d1) = (on_day(MIDNIGHT), on_day(LAST_MILLI));
                    (d0 < t && t < s) || (e < t && t < d1)
                }
            }
            // Quartz's CronCalendar re-resolves the wall time, so both passes of a fold count.
            Rule::Cron(cron) => !cron.matches_fields(wall(t, &self.zone)),
        }
    }

    /// A time at or before the first included time after an excluded `t`: where a trigger may
    /// resume its search without missing a fire.
    pub fn resume_after_excluded(&self, t: Timestamp) -> Timestamp {
        let mut resume = t;
        if let Some(base) = &self.base
            && !base.is_time_included(t)
        {
            resume = resume.max(base.resume_after_excluded(t));
        }
        if !self.own_includes(t) {
            resume = resume.max(self.own_resume(t));
        }
        resume
    }

    fn own_resume(&self, t: Timestamp) -> Timestamp {
        let zone = &self.zone;
        let next_day = || match wall(t, zone).date().tomorrow() {
            Ok(date) => earliest_instant(date.to_datetime(MIDNIGHT), zone).max(t),
            Err(_) => Timestamp::MAX,
        };
        match &self.rule {
            Rule::Weekly(_) | Rule::Monthly(_) | Rule::Holiday(_) | Rule::Annual(_) => next_day(),
            Rule::Daily { start, end, invert } => {
                let on_day = |time: Time| time_on_date_of(t, time, zone);
                let milli = SignedDuration::from_millis(1);
                let after = |x: Timestamp| x.checked_add(milli).unwrap_or(Timestamp::MAX);
                if *invert {
                    let s = on_day(*start);
                    if t < s {
                        s
                    } else {
                        time_on_date_of(next_day(), *start, zone)
                    }
                } else {
                    let (s, e) = (on_day(*start), on_day(*end));
                    if s <= t && t <= e { after(e) } else { after(t) }
                }
            }
            Rule::Cron(cron) => {
                let next_second =
                    Timestamp::from_second(t.as_second() + 1).unwrap_or(Timestamp::MAX);
                match cron.next_unmatched_after(wall(t, zone)) {
                    // The earliest instant of that wall time: a gap or a fold never makes the
                    // search skip an included time.
                    Some(unmatched) => earliest_instant(unmatched, zone).max(next_second),
                    None => Timestamp::MAX,
                }
            }
        }
    }
}

fn parse_month_day(text: &str) -> Result<(i8, i8), ScheduleError> {
    let invalid = || ScheduleError::Invalid(format!("annual day {text:?} is not MM-DD"));
    let (month, day) = text.split_once('-').ok_or_else(invalid)?;
    let month: i8 = month.parse().map_err(|_| invalid())?;
    let day: i8 = day.parse().map_err(|_| invalid())?;
    // Any leap year accepts every real month-day.
    Date::new(2000, month, day).map_err(|_| invalid())?;
    Ok((month, day))
}
