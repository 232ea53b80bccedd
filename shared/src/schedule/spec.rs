//! The JSON forms of schedules and calendars (docs/src/concepts/triggers-and-schedules.md and
//! docs/src/concepts/calendars.md), shared by the API, the CLI and the store. They are checked
//! and turned into evaluable forms by `Schedule::compile` and `Calendar::compile`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A trigger's schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ScheduleSpec {
    /// `{"kind":"cron","cron":"0 15 10 ? * 6L","time_zone":"America/New_York"}`
    Cron {
        /// Quartz (6-7 fields) or Unix (5 fields) cron expression.
        cron: String,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// No fire before (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        start_time: Option<Timestamp>,
        /// No fire after (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        end_time: Option<Timestamp>,
    },
    /// `{"kind":"simple","interval_ms":60000,"repeat_count":5}` (-1 = forever)
    Simple {
        /// Interval between fires.
        interval_ms: i64,
        /// Fires after the first (-1 = forever; 0 = once).
        #[serde(default)]
        repeat_count: i64,
        /// The first fire (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        start_time: Option<Timestamp>,
        /// No fire at or after (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        end_time: Option<Timestamp>,
    },
    /// Every n calendar units, in a zone.
    CalendarInterval {
        /// How many units.
        interval: i32,
        /// second … year.
        unit: IntervalUnit,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// Keep the start's hour of day across DST changes.
        #[serde(default)]
        preserve_hour_of_day_across_dst: bool,
        /// With the above: skip a day whose hour does not exist.
        #[serde(default)]
        skip_day_if_hour_does_not_exist: bool,
        /// The first fire (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        start_time: Option<Timestamp>,
        /// No fire at or after (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        end_time: Option<Timestamp>,
    },
    /// Every n seconds, minutes or hours within a daily window, on some days of the week.
    DailyTimeInterval {
        /// How many units.
        interval: i32,
        /// second, minute or hour.
        unit: IntervalUnit,
        /// Window start, `HH:MM[:SS]` (default 00:00:00).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_time_of_day: Option<String>,
        /// Window end, inclusive (default 23:59:59).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end_time_of_day: Option<String>,
        /// `["MON", …]` (default every day).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        days_of_week: Option<Vec<String>>,
        /// Fires after the first (-1 = forever).
        #[serde(default = "forever")]
        repeat_count: i64,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// No fire before (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        start_time: Option<Timestamp>,
        /// No fire after (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>, format = DateTime)]
        end_time: Option<Timestamp>,
    },
}

fn forever() -> i64 {
    -1
}

impl ScheduleSpec {
    /// The schedule with `start` as its start where it has none and its start anchors its
    /// fires (simple and calendar-interval: their intervals count from it), so that written
    /// out, it fires at the same times wherever it is made again.
    pub fn anchored_at(self, start: Timestamp) -> Self {
        match self {
            Self::Simple {
                interval_ms,
                repeat_count,
                start_time: None,
                end_time,
            } => Self::Simple {
                interval_ms,
                repeat_count,
                start_time: Some(start),
                end_time,
            },
            Self::CalendarInterval {
                interval,
                unit,
                time_zone,
                preserve_hour_of_day_across_dst,
                skip_day_if_hour_does_not_exist,
                start_time: None,
                end_time,
            } => Self::CalendarInterval {
                interval,
                unit,
                time_zone,
                preserve_hour_of_day_across_dst,
                skip_day_if_hour_does_not_exist,
                start_time: Some(start),
                end_time,
            },
            other => other,
        }
    }

    /// The schedule's own start time, if it has one.
    pub fn start_time(&self) -> Option<Timestamp> {
        match self {
            Self::Cron { start_time, .. }
            | Self::Simple { start_time, .. }
            | Self::CalendarInterval { start_time, .. }
            | Self::DailyTimeInterval { start_time, .. } => *start_time,
        }
    }

    /// The IANA zone the schedule is evaluated in (UTC when it names none; a simple trigger has
    /// none).
    pub fn time_zone(&self) -> &str {
        match self {
            Self::Cron { time_zone, .. }
            | Self::CalendarInterval { time_zone, .. }
            | Self::DailyTimeInterval { time_zone, .. } => time_zone.as_deref().unwrap_or("UTC"),
            Self::Simple { .. } => "UTC",
        }
    }

    /// Anchors the schedule at `start` and ends it at `end` (a trigger's own bounds, which a
    /// Quartz blob trigger keeps in its row as well as in its blob).
    pub fn set_bounds(&mut self, start: Option<Timestamp>, end: Option<Timestamp>) {
        match self {
            Self::Cron {
                start_time,
                end_time,
                ..
            }
            | Self::Simple {
                start_time,
                end_time,
                ..
            }
            | Self::CalendarInterval {
                start_time,
                end_time,
                ..
            }
            | Self::DailyTimeInterval {
                start_time,
                end_time,
                ..
            } => {
                *start_time = start;
                *end_time = end;
            }
        }
    }

    /// The schedule's end time, if it has one.
    pub fn end_time(&self) -> Option<Timestamp> {
        match self {
            Self::Cron { end_time, .. }
            | Self::Simple { end_time, .. }
            | Self::CalendarInterval { end_time, .. }
            | Self::DailyTimeInterval { end_time, .. } => *end_time,
        }
    }
}

/// A calendar unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntervalUnit {
    /// Seconds.
    Second,
    /// Minutes.
    Minute,
    /// Hours.
    Hour,
    /// Days (wall-clock days in the zone).
    Day,
    /// Weeks.
    Week,
    /// Months (the day pinned to the month's length).
    Month,
    /// Years.
    Year,
}

impl IntervalUnit {
    /// The unit Quartz names `name` (its `DateBuilder.IntervalUnit` constants: `SECOND` …
    /// `YEAR`); None for `MILLISECOND`, which chime has not, and anything else.
    pub fn from_quartz(name: &str) -> Option<Self> {
        Some(match name {
            "SECOND" => Self::Second,
            "MINUTE" => Self::Minute,
            "HOUR" => Self::Hour,
            "DAY" => Self::Day,
            "WEEK" => Self::Week,
            "MONTH" => Self::Month,
            "YEAR" => Self::Year,
            _ => return None,
        })
    }

    /// Length in seconds of the units measured in elapsed time.
    pub fn seconds(self) -> Option<i64> {
        match self {
            Self::Second => Some(1),
            Self::Minute => Some(60),
            Self::Hour => Some(3600),
            _ => None,
        }
    }
}

/// An exclusion calendar: times it excludes never fire. `base` chains another calendar (a time
/// is excluded if either excludes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CalendarSpec {
    /// Whole dates: `{"kind":"holiday","dates":["2026-12-25"]}`.
    Holiday {
        /// Excluded dates (`YYYY-MM-DD`).
        dates: Vec<String>,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// A calendar whose exclusions add to these.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(no_recursion, value_type = Option<Object>)]
        base: Option<Box<CalendarSpec>>,
    },
    /// Days of the week: `{"kind":"weekly","excluded_days":["SAT","SUN"]}`.
    Weekly {
        /// Excluded days (`SUN` … `SAT`).
        excluded_days: Vec<String>,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// A calendar whose exclusions add to these.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(no_recursion, value_type = Option<Object>)]
        base: Option<Box<CalendarSpec>>,
    },
    /// Days of the month: `{"kind":"monthly","excluded_days":[1,15,31]}`.
    Monthly {
        /// Excluded days (1-31).
        excluded_days: Vec<u8>,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// A calendar whose exclusions add to these.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(no_recursion, value_type = Option<Object>)]
        base: Option<Box<CalendarSpec>>,
    },
    /// Days of the year, every year: `{"kind":"annual","excluded_days":["12-25"]}`.
    Annual {
        /// Excluded days (`MM-DD`).
        excluded_days: Vec<String>,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// A calendar whose exclusions add to these.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(no_recursion, value_type = Option<Object>)]
        base: Option<Box<CalendarSpec>>,
    },
    /// A time range every day (or, inverted, everything but it).
    Daily {
        /// Range start, `HH:MM[:SS[.mmm]]`.
        range_start: String,
        /// Range end, `HH:MM[:SS[.mmm]]`.
        range_end: String,
        /// Exclude everything but the range.
        #[serde(default)]
        invert: bool,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// A calendar whose exclusions add to these.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(no_recursion, value_type = Option<Object>)]
        base: Option<Box<CalendarSpec>>,
    },
    /// The seconds a cron expression matches.
    Cron {
        /// Quartz or Unix cron expression.
        cron: String,
        /// IANA zone (default UTC).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<String>,
        /// A calendar whose exclusions add to these.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(no_recursion, value_type = Option<Object>)]
        base: Option<Box<CalendarSpec>>,
    },
}
