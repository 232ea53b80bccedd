//! `QRTZ_BLOB_TRIGGERS.BLOB_DATA` (a whole Java-serialized trigger) to chime's
//! [`ScheduleSpec`] and the trigger's state.
//!
//! Only Quartz's four trigger implementations are read, by exact class: a subclass is stored as
//! a blob precisely because it has state of its own (`hasAdditionalProperties`), which chime
//! would silently drop, so it is refused like any other class.

use chime_core::schedule::{IntervalUnit, Schedule, ScheduleSpec};
use jiff::Timestamp;

use crate::java::{Graph, JObject, JValue, JavaError, jdk};
use crate::job_data::{self, DataError, DecodedData};
use crate::zones::{self, UnknownZone};

/// The trigger classes read.
pub const CLASSES: [&str; 4] = [SIMPLE, CRON, CALENDAR_INTERVAL, DAILY_TIME_INTERVAL];

const SIMPLE: &str = "org.quartz.impl.triggers.SimpleTriggerImpl";
const CRON: &str = "org.quartz.impl.triggers.CronTriggerImpl";
const CALENDAR_INTERVAL: &str = "org.quartz.impl.triggers.CalendarIntervalTriggerImpl";
const DAILY_TIME_INTERVAL: &str = "org.quartz.impl.triggers.DailyTimeIntervalTriggerImpl";

const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A decoded blob trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct BlobTrigger {
    /// The Quartz class.
    pub class: String,
    /// `AbstractTrigger.name`.
    pub name: Option<String>,
    /// `AbstractTrigger.group`.
    pub group: Option<String>,
    /// `AbstractTrigger.jobName`.
    pub job_name: Option<String>,
    /// `AbstractTrigger.jobGroup`.
    pub job_group: Option<String>,
    /// The schedule, its start and end from the trigger's dates and its zone written out.
    pub schedule: ScheduleSpec,
    /// Fires so far (a cron trigger does not count them: 0).
    pub times_triggered: i64,
    /// Quartz's `MISFIRE_INSTRUCTION_*` code.
    pub misfire_instruction: i32,
    /// Quartz's priority (default 5).
    pub priority: i32,
    /// The calendar the trigger skips through, by name.
    pub calendar_name: Option<String>,
    /// `AbstractTrigger.description`.
    pub description: Option<String>,
    /// The trigger's own JobDataMap.
    pub job_data: DecodedData,
    /// When it fires next, if it does.
    pub next_fire_time: Option<Timestamp>,
    /// When it fired last, if it has.
    pub previous_fire_time: Option<Timestamp>,
}

/// A blob trigger chime cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlobError {
    /// The Java stream does not parse, or a JDK value in it is malformed.
    #[error("unreadable Java blob trigger: {0}")]
    Serialization(#[from] JavaError),
    /// Not one of Quartz's four trigger implementations (subclasses included).
    #[error(
        "blob trigger class {0} is not one of Quartz's four trigger implementations \
         (a subclass keeps state of its own, which chime cannot carry)"
    )]
    UnsupportedClass(String),
    /// A trigger evaluated in the JVM's default zone, and none was given.
    #[error("{class} uses the JVM's default time zone: give the Quartz JVM's zone")]
    NeedsJvmZone {
        /// The trigger class.
        class: String,
    },
    /// A zone chime has no equivalent for.
    #[error(transparent)]
    UnknownZone(#[from] UnknownZone),
    /// The trigger's JobDataMap cannot be taken.
    #[error("blob trigger job data: {0}")]
    JobData(#[from] DataError),
    /// A field Quartz itself would never have written (out of range, missing).
    #[error("{class}.{field}: {detail}")]
    Invalid {
        /// The trigger class.
        class: String,
        /// The field.
        field: String,
        /// What is wrong.
        detail: String,
    },
    /// The trigger reads but chime refuses its schedule.
    #[error("{class}: chime cannot take its schedule: {detail}")]
    Rejected {
        /// The trigger class.
        class: String,
        /// chime's reason.
        detail: String,
    },
}

/// Decodes a `BLOB_DATA` column. `jvm_zone`: the Quartz JVM's default zone (a Java or IANA
/// id), for daily-time-interval triggers (which have no zone of their own) and triggers stored
/// without one.
pub fn decode(bytes: &[u8], jvm_zone: Option<&str>) -> Result<BlobTrigger, BlobError> {
    let graph = Graph::parse(bytes)?;
    match graph.root() {
        JValue::Object(object) => from_java(object, jvm_zone, bytes.len()),
        other => Err(BlobError::UnsupportedClass(other.type_name().to_string())),
    }
}

/// Decodes a trigger object already read from a stream of `stream_len` bytes (which bounds what
/// its job data may expand to).
pub fn from_java(
    trigger: JObject<'_>,
    jvm_zone: Option<&str>,
    stream_len: usize,
) -> Result<BlobTrigger, BlobError> {
    let class = trigger.class_name();
    if !CLASSES.contains(&class) {
        return Err(BlobError::UnsupportedClass(class.to_string()));
    }
    let string = |name: &str| -> Result<Option<String>, BlobError> {
        match trigger.field(name) {
            None | Some(JValue::Null) => Ok(None),
            Some(JValue::String(s)) => Ok(Some(s.to_string())),
            Some(other) => Err(invalid(
                class,
                name,
                &format!("holds a {}", other.type_name()),
            )),
        }
    };
    let start_time = date(trigger, "startTime")?;
    let end_time = date(trigger, "endTime")?;
    let zone = |field: Option<JObject<'_>>| -> Result<String, BlobError> {
        let java_id = match field {
            Some(zone) => jdk::time_zone_id(zone)?,
            None => jvm_zone.ok_or_else(|| BlobError::NeedsJvmZone {
                class: class.to_string(),
            })?,
        };
        Ok(zones::to_chime(java_id)?)
    };
    let (schedule, times_triggered) = match class {
        SIMPLE => (
            ScheduleSpec::Simple {
                interval_ms: trigger.long_field("repeatInterval")?,
                repeat_count: i64::from(trigger.int_field("repeatCount")?),
                start_time,
                end_time,
            },
            trigger.int_field("timesTriggered")?,
        ),
        CRON => {
            let expression = trigger
                .object_field("cronEx")?
                .ok_or_else(|| invalid(class, "cronEx", "is null"))?;
            let cron = expression
                .string_field("cronExpression")?
                .ok_or_else(|| invalid(class, "cronEx", "has no expression"))?;
            let time_zone = zone(zone_field(expression)?)?;
            let spec = ScheduleSpec::Cron {
                cron: cron.to_string(),
                time_zone: Some(time_zone),
                start_time,
                end_time,
            };
            (spec, 0)
        }
        CALENDAR_INTERVAL => (
            ScheduleSpec::CalendarInterval {
                interval: trigger.int_field("repeatInterval")?,
                unit: unit(trigger)?,
                time_zone: Some(zone(zone_field(trigger)?)?),
                preserve_hour_of_day_across_dst: trigger
                    .bool_field("preserveHourOfDayAcrossDaylightSavings")?,
                skip_day_if_hour_does_not_exist: trigger.bool_field("skipDayIfHourDoesNotExist")?,
                start_time,
                end_time,
            },
            trigger.int_field("timesTriggered")?,
        ),
        _ => (
            ScheduleSpec::DailyTimeInterval {
                interval: trigger.int_field("repeatInterval")?,
                unit: unit(trigger)?,
                start_time_of_day: time_of_day(trigger, "startTimeOfDay")?,
                end_time_of_day: time_of_day(trigger, "endTimeOfDay")?,
                days_of_week: days_of_week(trigger)?,
                repeat_count: i64::from(trigger.int_field("repeatCount")?),
                // DailyTimeIntervalTriggerImpl (2.3) has no zone: it computes in the JVM's.
                time_zone: Some(zone(None)?),
                start_time,
                end_time,
            },
            trigger.int_field("timesTriggered")?,
        ),
    };
    // The zone is checked above; a fixed offset is what only a newer chime takes, so check the
    // rest with UTC.
    Schedule::compile(&with_utc(schedule.clone()), Timestamp::UNIX_EPOCH).map_err(|e| {
        BlobError::Rejected {
            class: class.to_string(),
            detail: e.to_string(),
        }
    })?;
    Ok(BlobTrigger {
        class: class.to_string(),
        name: string("name")?,
        group: string("group")?,
        job_name: string("jobName")?,
        job_group: string("jobGroup")?,
        schedule,
        times_triggered: i64::from(times_triggered),
        misfire_instruction: trigger.int_field("misfireInstruction")?,
        priority: trigger.int_field("priority")?,
        calendar_name: string("calendarName")?,
        description: string("description")?,
        job_data: job_data::from_java(
            trigger.field("jobDataMap").unwrap_or(JValue::Null),
            stream_len,
        )?,
        next_fire_time: date(trigger, "nextFireTime")?,
        previous_fire_time: date(trigger, "previousFireTime")?,
    })
}

fn invalid(class: &str, field: &str, detail: &str) -> BlobError {
    BlobError::Invalid {
        class: class.to_string(),
        field: field.to_string(),
        detail: detail.to_string(),
    }
}

/// A `java.util.Date` field (null or absent: None).
fn date(trigger: JObject<'_>, field: &str) -> Result<Option<Timestamp>, BlobError> {
    let class = trigger.class_name();
    match trigger.field(field) {
        None | Some(JValue::Null) => Ok(None),
        Some(JValue::Object(date)) => {
            let ms = jdk::date_millis(date)?;
            Timestamp::from_millisecond(ms)
                .map(Some)
                .map_err(|_| invalid(class, field, &format!("{ms} ms is out of range")))
        }
        Some(other) => Err(invalid(
            class,
            field,
            &format!("holds a {}", other.type_name()),
        )),
    }
}

/// The `timeZone` field (null or absent: None, the JVM's zone).
fn zone_field<'g>(object: JObject<'g>) -> Result<Option<JObject<'g>>, BlobError> {
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

/// `repeatIntervalUnit`, a `DateBuilder.IntervalUnit` constant.
fn unit(trigger: JObject<'_>) -> Result<IntervalUnit, BlobError> {
    let class = trigger.class_name();
    let constant = match trigger.field("repeatIntervalUnit") {
        Some(JValue::Enum(e)) => e.constant,
        _ => {
            return Err(invalid(
                class,
                "repeatIntervalUnit",
                "is not an enum constant",
            ));
        }
    };
    IntervalUnit::from_quartz(constant).ok_or_else(|| {
        invalid(
            class,
            "repeatIntervalUnit",
            &format!("{constant} is not a unit chime has"),
        )
    })
}

/// A `TimeOfDay` field as `HH:MM:SS` (null: None, Quartz's default of the whole day).
fn time_of_day(trigger: JObject<'_>, field: &str) -> Result<Option<String>, BlobError> {
    let class = trigger.class_name();
    let Some(time) = trigger.object_field(field)? else {
        return Ok(None);
    };
    let part = |name: &str, max: i32| -> Result<i32, BlobError> {
        let value = time.int_field(name)?;
        if (0..=max).contains(&value) {
            Ok(value)
        } else {
            Err(invalid(
                class,
                field,
                &format!("{name} {value} is out of range"),
            ))
        }
    };
    Ok(Some(format!(
        "{:02}:{:02}:{:02}",
        part("hour", 23)?,
        part("minute", 59)?,
        part("second", 59)?
    )))
}

/// `daysOfWeek`, a set of `java.util.Calendar` day numbers (1 = Sunday … 7 = Saturday), as
/// `["SUN", …]` in week order (null: None, every day).
fn days_of_week(trigger: JObject<'_>) -> Result<Option<Vec<String>>, BlobError> {
    let class = trigger.class_name();
    let Some(set) = trigger.object_field("daysOfWeek")? else {
        return Ok(None);
    };
    let elements = jdk::collection_elements(set)?
        .ok_or_else(|| invalid(class, "daysOfWeek", &format!("is a {}", set.class_name())))?;
    let mut days = [false; 7];
    for element in elements {
        let number = element
            .as_object()
            .and_then(jdk::unboxed)
            .and_then(|v| match v {
                JValue::Int(n) => usize::try_from(n).ok(),
                _ => None,
            })
            .filter(|n| (1..=7).contains(n))
            .ok_or_else(|| invalid(class, "daysOfWeek", "holds something not a day 1-7"))?;
        if let Some(slot) = days.get_mut(number - 1) {
            *slot = true;
        }
    }
    Ok(Some(
        WEEKDAYS
            .iter()
            .zip(days)
            .filter(|(_, on)| *on)
            .map(|(day, _)| (*day).to_string())
            .collect(),
    ))
}

fn with_utc(spec: ScheduleSpec) -> ScheduleSpec {
    let mut spec = spec;
    match &mut spec {
        ScheduleSpec::Cron { time_zone, .. }
        | ScheduleSpec::CalendarInterval { time_zone, .. }
        | ScheduleSpec::DailyTimeInterval { time_zone, .. } => *time_zone = Some("UTC".into()),
        ScheduleSpec::Simple { .. } => {}
    }
    spec
}
