//! `QRTZ_CALENDARS.CALENDAR` (a Java-serialized Quartz calendar) to chime's [`CalendarSpec`].
//!
//! Quartz's six calendar classes are read; each level of a chain becomes its own
//! [`DecodedCalendar`], because Quartz embeds the base calendar by value inside the blob (a copy
//! taken when the calendar was stored, not a reference to another row).
//!
//! A Quartz calendar without a time zone uses the JVM's default zone at run time, while chime's
//! default is UTC, so every level gets its zone written out: the JVM's zone must be given when
//! a calendar has none.

use chime_core::schedule::{Calendar, CalendarSpec};
use jiff::civil::Time;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

use crate::java::{Graph, JObject, JValue, JavaError, jdk};
use crate::zones::{self, UnknownZone};

/// The most levels a calendar chain may have.
pub const MAX_CHAIN: usize = 32;

/// The calendar classes read (exactly these: a subclass may change what a day means).
pub const CLASSES: [&str; 6] = [HOLIDAY, WEEKLY, MONTHLY, ANNUAL, DAILY, CRON];

const HOLIDAY: &str = "org.quartz.impl.calendar.HolidayCalendar";
const WEEKLY: &str = "org.quartz.impl.calendar.WeeklyCalendar";
const MONTHLY: &str = "org.quartz.impl.calendar.MonthlyCalendar";
const ANNUAL: &str = "org.quartz.impl.calendar.AnnualCalendar";
const DAILY: &str = "org.quartz.impl.calendar.DailyCalendar";
const CRON: &str = "org.quartz.impl.calendar.CronCalendar";

const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One level of a decoded calendar chain.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedCalendar {
    /// The Quartz class.
    pub class: String,
    /// This level alone (its `base` is None; see [`DecodedCalendar::to_spec`]), its zone
    /// always set.
    pub spec: CalendarSpec,
    /// `BaseCalendar.description`.
    pub description: Option<String>,
    /// The calendar this one was chained to.
    pub base: Option<Box<DecodedCalendar>>,
    /// What was dropped or changed at this level, one line each.
    pub warnings: Vec<String>,
}

impl DecodedCalendar {
    /// The whole chain as one chime calendar, bases nested as `base`.
    pub fn to_spec(&self) -> CalendarSpec {
        let base = self.base.as_ref().map(|b| Box::new(b.to_spec()));
        with_base(self.spec.clone(), base)
    }

    /// The warnings of every level, each prefixed with its class.
    pub fn all_warnings(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .warnings
            .iter()
            .map(|w| format!("{}: {w}", short_name(&self.class)))
            .collect();
        if let Some(base) = &self.base {
            all.extend(base.all_warnings());
        }
        all
    }
}

/// A calendar chime cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// The Java stream does not parse, or a JDK value in it is malformed.
    #[error("unreadable Java calendar: {0}")]
    Serialization(#[from] JavaError),
    /// Not one of Quartz's six calendar classes.
    #[error("calendar class {0} is not one of Quartz's six calendar classes")]
    UnsupportedClass(String),
    /// The calendar has no zone (Quartz uses the JVM's) and none was given.
    #[error(
        "{class} has no time zone, so Quartz uses its JVM's default zone: give the Quartz JVM's zone"
    )]
    NeedsJvmZone {
        /// The calendar class.
        class: String,
    },
    /// A zone chime has no equivalent for.
    #[error(transparent)]
    UnknownZone(#[from] UnknownZone),
    /// A field Quartz itself would never have written (out of range, missing).
    #[error("{class}.{field}: {detail}")]
    Invalid {
        /// The calendar class.
        class: String,
        /// The field.
        field: String,
        /// What is wrong.
        detail: String,
    },
    /// The calendar reads but chime refuses it (a cron expression chime cannot parse).
    #[error("{class}: chime cannot take it: {detail}")]
    Rejected {
        /// The calendar class.
        class: String,
        /// chime's reason.
        detail: String,
    },
    /// The base-calendar chain loops or is longer than [`MAX_CHAIN`].
    #[error("the base-calendar chain is cyclic or longer than {MAX_CHAIN} levels")]
    ChainTooLong,
}

/// Decodes a `CALENDAR` column. `jvm_zone`: the Quartz JVM's default zone (a Java or IANA id),
/// for calendars stored without one.
pub fn decode(bytes: &[u8], jvm_zone: Option<&str>) -> Result<DecodedCalendar, CalendarError> {
    let graph = Graph::parse(bytes)?;
    match graph.root() {
        JValue::Object(object) => from_java(object, jvm_zone),
        other => Err(CalendarError::UnsupportedClass(
            other.type_name().to_string(),
        )),
    }
}

/// Decodes a calendar object already read from a stream.
pub fn from_java(
    object: JObject<'_>,
    jvm_zone: Option<&str>,
) -> Result<DecodedCalendar, CalendarError> {
    let mut seen = Vec::new();
    level(object, jvm_zone, &mut seen)
}

fn level(
    object: JObject<'_>,
    jvm_zone: Option<&str>,
    seen: &mut Vec<usize>,
) -> Result<DecodedCalendar, CalendarError> {
    if seen.contains(&object.id()) || seen.len() >= MAX_CHAIN {
        return Err(CalendarError::ChainTooLong);
    }
    seen.push(object.id());
    let class = object.class_name();
    if !CLASSES.contains(&class) {
        return Err(CalendarError::UnsupportedClass(class.to_string()));
    }
    let description = match object.field("description") {
        Some(JValue::String(s)) => Some(s.to_string()),
        _ => None,
    };
    // A CronCalendar's zone is its expression's (BaseCalendar.timeZone is unused there).
    let cron = if class == CRON {
        let expression = object
            .object_field("cronExpression")?
            .ok_or_else(|| invalid(class, "cronExpression", "is null"))?;
        let text = expression
            .string_field("cronExpression")?
            .ok_or_else(|| invalid(class, "cronExpression", "has no expression"))?;
        Some((text.to_string(), zone_object(expression)?))
    } else {
        None
    };
    let zone_field = match &cron {
        Some((_, zone)) => *zone,
        None => zone_object(object)?,
    };
    let java_zone = match zone_field {
        Some(zone) => jdk::time_zone_id(zone)?,
        None => jvm_zone.ok_or_else(|| CalendarError::NeedsJvmZone {
            class: class.to_string(),
        })?,
    };
    let time_zone = Some(zones::to_chime(java_zone)?);
    let zone = zones::to_jiff(java_zone)?;
    let mut warnings = Vec::new();
    let spec = match class {
        HOLIDAY => CalendarSpec::Holiday {
            dates: holiday_dates(object, &zone, java_zone, &mut warnings)?,
            time_zone,
            base: None,
        },
        WEEKLY => {
            let days = flags(object, "excludeDays", 8)?;
            let excluded_days = WEEKDAYS
                .iter()
                .enumerate()
                .filter(|(i, _)| days.get(i + 1).copied().unwrap_or(false))
                .map(|(_, day)| (*day).to_string())
                .collect();
            CalendarSpec::Weekly {
                excluded_days,
                time_zone,
                base: None,
            }
        }
        MONTHLY => {
            let days = flags(object, "excludeDays", 31)?;
            let excluded_days = (1u8..=31)
                .filter(|day| days.get(usize::from(*day) - 1).copied().unwrap_or(false))
                .collect();
            CalendarSpec::Monthly {
                excluded_days,
                time_zone,
                base: None,
            }
        }
        ANNUAL => CalendarSpec::Annual {
            excluded_days: annual_days(object)?,
            time_zone,
            base: None,
        },
        DAILY => {
            let time = |prefix: &str| -> Result<String, CalendarError> {
                let part = |name: &str, max: i32| -> Result<i32, CalendarError> {
                    let field = format!("{prefix}{name}");
                    let value = object.int_field(&field)?;
                    if !(0..=max).contains(&value) {
                        return Err(invalid(class, &field, &format!("{value} is out of range")));
                    }
                    Ok(value)
                };
                Ok(format!(
                    "{:02}:{:02}:{:02}.{:03}",
                    part("HourOfDay", 23)?,
                    part("Minute", 59)?,
                    part("Second", 59)?,
                    part("Millis", 999)?
                ))
            };
            CalendarSpec::Daily {
                range_start: time("rangeStarting")?,
                range_end: time("rangeEnding")?,
                invert: object.bool_field("invertTimeRange")?,
                time_zone,
                base: None,
            }
        }
        _ => CalendarSpec::Cron {
            cron: cron.map(|(text, _)| text).unwrap_or_default(),
            time_zone,
            base: None,
        },
    };
    // The zone is checked above; a fixed offset is what only a newer chime takes, so check the
    // rest of the level with UTC.
    Calendar::compile(&with_utc(spec.clone())).map_err(|e| CalendarError::Rejected {
        class: class.to_string(),
        detail: e.to_string(),
    })?;
    let base = match object.field("baseCalendar") {
        None | Some(JValue::Null) => None,
        Some(JValue::Object(base)) => Some(Box::new(level(base, jvm_zone, seen)?)),
        Some(other) => {
            return Err(invalid(
                class,
                "baseCalendar",
                &format!("holds a {}", other.type_name()),
            ));
        }
    };
    Ok(DecodedCalendar {
        class: class.to_string(),
        spec,
        description,
        base,
        warnings,
    })
}

fn invalid(class: &str, field: &str, detail: &str) -> CalendarError {
    CalendarError::Invalid {
        class: class.to_string(),
        field: field.to_string(),
        detail: detail.to_string(),
    }
}

/// The `timeZone` field: a zone, null, or absent (Quartz 1.5 calendars have none).
fn zone_object<'g>(object: JObject<'g>) -> Result<Option<JObject<'g>>, CalendarError> {
    match object.field("timeZone") {
        None | Some(JValue::Null) => Ok(None),
        Some(JValue::Object(zone)) => Ok(Some(zone)),
        Some(other) => Err(invalid(
            object.class_name(),
            "timeZone",
            &format!("holds a {}", other.type_name()),
        )),
    }
}

fn flags(object: JObject<'_>, field: &str, len: usize) -> Result<Vec<bool>, CalendarError> {
    let class = object.class_name();
    match object.field(field) {
        Some(JValue::Array(array)) => match array.booleans() {
            Some(days) if days.len() >= len => Ok(days.to_vec()),
            Some(days) => Err(invalid(
                class,
                field,
                &format!("has {} entries, expected {len}", days.len()),
            )),
            None => Err(invalid(class, field, "is not a boolean[]")),
        },
        _ => Err(invalid(class, field, "is missing")),
    }
}

/// HolidayCalendar's TreeSet of Dates: each the start of a day in the calendar's zone (Quartz
/// looks up `startOfDay(t)` exactly), as `YYYY-MM-DD`.
fn holiday_dates(
    object: JObject<'_>,
    zone: &TimeZone,
    zone_name: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, CalendarError> {
    let set = object
        .object_field("dates")?
        .ok_or_else(|| invalid(HOLIDAY, "dates", "is null"))?;
    let elements = jdk::collection_elements(set)?
        .ok_or_else(|| invalid(HOLIDAY, "dates", &format!("is a {}", set.class_name())))?;
    let mut dates = Vec::new();
    for element in elements {
        let date = element.as_object().ok_or_else(|| {
            invalid(
                HOLIDAY,
                "dates",
                &format!("holds a {}", element.type_name()),
            )
        })?;
        let ms = jdk::date_millis(date)?;
        let at = Timestamp::from_millisecond(ms)
            .map_err(|_| invalid(HOLIDAY, "dates", &format!("date {ms} ms is out of range")))?;
        let local = at.to_zoned(zone.clone());
        if !is_start_of_day(&local) {
            warnings.push(format!(
                "excluded date {at:.3} is not the start of a day in {zone_name} \
                 ({local}), so Quartz never matches it: dropped"
            ));
            continue;
        }
        dates.push(local.date().to_string());
    }
    dates.sort();
    dates.dedup();
    Ok(dates)
}

/// Whether `local` is where Quartz's `getStartOfDayJavaCalendar` puts a day's start: midnight,
/// or the first instant of a day whose midnight falls in a gap.
fn is_start_of_day(local: &Zoned) -> bool {
    local.time() == Time::midnight()
        || local
            .start_of_day()
            .is_ok_and(|start| start.timestamp() == local.timestamp())
}

/// AnnualCalendar's ArrayList of java.util.Calendar: each one's month and day, computed from
/// its `time` in its own zone (the year is ignored), as `MM-DD`.
fn annual_days(object: JObject<'_>) -> Result<Vec<String>, CalendarError> {
    let list = object
        .object_field("excludeDays")?
        .ok_or_else(|| invalid(ANNUAL, "excludeDays", "is null"))?;
    let elements = jdk::collection_elements(list)?.ok_or_else(|| {
        invalid(
            ANNUAL,
            "excludeDays",
            &format!("is a {}", list.class_name()),
        )
    })?;
    let mut days = Vec::new();
    for element in elements {
        let calendar = element
            .as_object()
            .filter(|c| c.is_instance_of("java.util.Calendar"))
            .ok_or_else(|| {
                invalid(
                    ANNUAL,
                    "excludeDays",
                    &format!("holds a {}", element.type_name()),
                )
            })?;
        let ms = match calendar.field_in("java.util.Calendar", "time") {
            Some(JValue::Long(ms)) => ms,
            _ => return Err(invalid(ANNUAL, "excludeDays", "a Calendar has no time")),
        };
        let zone_id = java_calendar_zone(calendar)?;
        let zone = zones::to_jiff(zone_id)?;
        let at = Timestamp::from_millisecond(ms).map_err(|_| {
            invalid(
                ANNUAL,
                "excludeDays",
                &format!("time {ms} ms is out of range"),
            )
        })?;
        let local = at.to_zoned(zone);
        days.push(format!("{:02}-{:02}", local.month(), local.day()));
    }
    days.sort();
    days.dedup();
    Ok(days)
}

/// A java.util.Calendar's zone: `Calendar.writeObject` writes the real zone (a ZoneInfo) as
/// its annotation and a SimpleTimeZone stand-in in the `zone` field; both carry the ID.
fn java_calendar_zone<'g>(calendar: JObject<'g>) -> Result<&'g str, CalendarError> {
    if let Some(mut annotation) = calendar.annotation("java.util.Calendar")
        && annotation.remaining_objects() > 0
        && let JValue::Object(zone) = annotation.read_object()?
    {
        return Ok(jdk::time_zone_id(zone)?);
    }
    match calendar.field_in("java.util.Calendar", "zone") {
        Some(JValue::Object(zone)) => Ok(jdk::time_zone_id(zone)?),
        _ => Err(invalid(ANNUAL, "excludeDays", "a Calendar has no zone")),
    }
}

/// `org.quartz.impl.calendar.HolidayCalendar` → `HolidayCalendar`.
fn short_name(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

fn with_base(spec: CalendarSpec, new_base: Option<Box<CalendarSpec>>) -> CalendarSpec {
    let mut spec = spec;
    match &mut spec {
        CalendarSpec::Holiday { base, .. }
        | CalendarSpec::Weekly { base, .. }
        | CalendarSpec::Monthly { base, .. }
        | CalendarSpec::Annual { base, .. }
        | CalendarSpec::Daily { base, .. }
        | CalendarSpec::Cron { base, .. } => *base = new_base,
    }
    spec
}

fn with_utc(spec: CalendarSpec) -> CalendarSpec {
    let mut spec = spec;
    match &mut spec {
        CalendarSpec::Holiday { time_zone, .. }
        | CalendarSpec::Weekly { time_zone, .. }
        | CalendarSpec::Monthly { time_zone, .. }
        | CalendarSpec::Annual { time_zone, .. }
        | CalendarSpec::Daily { time_zone, .. }
        | CalendarSpec::Cron { time_zone, .. } => *time_zone = Some("UTC".into()),
    }
    spec
}
