//! What an import makes of a Quartz store: chime's calendars, jobs, triggers and paused groups,
//! with the report of what was taken, what was not and why. Pure: it reads the rows
//! [`crate::source`] gave and writes nothing, so a dry run and a real run plan the same.
//!
//! The rules are Quartz's own, as its JDBC store and its start-up recovery apply them:
//!
//! | Quartz | chime |
//! | --- | --- |
//! | trigger WAITING, ACQUIRED, BLOCKED (MISFIRED in old stores) | waiting, from the stored `NEXT_FIRE_TIME` |
//! | PAUSED, PAUSED_BLOCKED | paused (a misfire is judged when it is resumed, as Quartz does) |
//! | ERROR | paused, reported with the reason |
//! | COMPLETE, or no next fire time | not imported, reported |
//! | `NEXT_FIRE_TIME` older than the misfire threshold | the trigger's misfire policy applied now |
//! | a DAILY_I trigger Quartz fires once past its end time (it never checks the end against the fire it finds) | its end time moved to that fire (after the misfire policy), reported |
//! | FIRED_TRIGGERS EXECUTING of a job requesting recovery | a one-shot `RECOVERING_JOBS` trigger at its scheduled time, with the four `QRTZ_FAILED_JOB_ORIG_TRIGGER_*` keys |
//! | a job class with no mapping | the job imported paused (its triggers too), reported as needing one |
//! | a calendar's embedded base calendar | nested as the calendar's `base`, and also a calendar of its own named `<calendar>.base` |

use std::collections::{BTreeMap, HashMap, HashSet};

use chime_core::model::check_name;
use chime_core::schedule::misfire::{self, MisfirePolicy};
use chime_core::schedule::{Calendar, CalendarSpec, IntervalUnit, Schedule, ScheduleSpec};
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::calendars::DecodedCalendar;
use crate::mapping::{JobClassMappings, Target};
use crate::source::{
    Blob, CalendarRow, FiredRow, JobRow, QuartzStore, SimpleProperties, TriggerDetail, TriggerRow,
};
use crate::{blob_triggers, calendars, job_data, zones};

/// Quartz's marker row in `PAUSED_TRIGGER_GRPS` for `pauseAll()`: every group, new ones too
/// (chime keeps it under the same name).
pub const ALL_GROUPS_PAUSED: &str = chime_core::store::triggers::ALL_GROUPS;

/// The group Quartz's recovery puts its one-shot recovery triggers in.
pub const RECOVERING_JOBS_GROUP: &str = "RECOVERING_JOBS";

/// How many next fire times the report lists per trigger.
pub const REPORTED_FIRES: usize = 3;

/// How to read what the store does not say.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// `--jvm-time-zone`: the Quartz nodes' `user.timezone`, as chime names it.
    pub jvm_zone: Option<String>,
    /// `--misfire-threshold-ms`.
    pub misfire_threshold: SignedDuration,
    /// `--job-class` and `--job-classes`.
    pub mappings: JobClassMappings,
    /// The moment of the cut-over: misfires are judged against it.
    pub now: Timestamp,
}

/// A calendar to write.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedCalendar {
    /// Its name.
    pub name: String,
    /// The whole chain.
    pub definition: CalendarSpec,
    /// Quartz's description.
    pub description: String,
    /// Made from a base calendar embedded in another, not a stored one.
    #[serde(skip)]
    pub generated: bool,
}

/// A job to write.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedJob {
    /// Group.
    pub group: String,
    /// Name.
    pub name: String,
    /// Quartz's description.
    pub description: String,
    /// The Quartz class it came from.
    pub class: String,
    /// shell or http.
    pub kind: String,
    /// The kind's spec.
    pub spec: Value,
    /// Not `@DisallowConcurrentExecution`.
    pub concurrent: bool,
    /// `@PersistJobDataAfterExecution`.
    pub persist_data: bool,
    /// Re-run after a crash.
    pub requests_recovery: bool,
    /// Kept without triggers.
    pub durable: bool,
    /// Paused: its class has no mapping.
    pub paused: bool,
    /// Its job data, as JSON text: kept as text, a map costs about what it says, where a
    /// parsed map of many short entries costs twenty times that.
    pub data: Box<RawValue>,
}

/// A trigger to write.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedTrigger {
    /// Group.
    pub group: String,
    /// Name.
    pub name: String,
    /// Its job's group.
    pub job_group: String,
    /// Its job's name.
    pub job_name: String,
    /// Quartz's description.
    pub description: String,
    /// The schedule, anchored at Quartz's start time.
    pub schedule: ScheduleSpec,
    /// Its calendar.
    pub calendar: Option<String>,
    /// The misfire policy Quartz's instruction means for its kind.
    pub misfire_policy: MisfirePolicy,
    /// Priority.
    pub priority: i32,
    /// waiting or paused.
    pub state: &'static str,
    /// Quartz's `START_TIME`.
    pub start_time: Timestamp,
    /// The next fire: Quartz's stored one, or what its misfire policy made of it.
    pub next_fire_time: Timestamp,
    /// The last fire.
    pub prev_fire_time: Option<Timestamp>,
    /// Fires so far.
    pub times_triggered: i64,
    /// Its data, over the job's, as JSON text.
    pub data: Box<RawValue>,
}

/// Everything an import writes, and its report.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Calendars, bases before the calendars chained to them.
    pub calendars: Vec<PlannedCalendar>,
    /// Jobs.
    pub jobs: Vec<PlannedJob>,
    /// Triggers, recovery runs included.
    pub triggers: Vec<PlannedTrigger>,
    /// Paused trigger groups (with or without triggers).
    pub paused_groups: Vec<String>,
    /// `pauseAll()` was in force: every group is paused, new ones too.
    pub all_groups_paused: bool,
    /// What the import will say.
    pub report: Report,
}

/// What an import took, left and why.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Quartz's `SCHED_NAME`.
    pub scheduler: String,
    /// Where the tables were found.
    pub tables: String,
    /// Nothing was written.
    pub dry_run: bool,
    /// How many of each kind are imported (or would be, in a dry run).
    pub imported: Counts,
    /// Items not imported, each with its reason.
    pub skipped: Vec<Item>,
    /// Items that cannot be read: any of these stops the import unless `--skip-unreadable`.
    pub failed: Vec<Item>,
    /// Jobs whose class has no mapping: imported paused.
    pub needs_mapping: Vec<NeedsMapping>,
    /// Values changed on the way, each naming its item.
    pub warnings: Vec<String>,
    /// Items already in chime's store, left as they are (without `--replace`).
    pub already_present: Vec<String>,
    /// Every trigger imported, with its next fire times.
    pub triggers: Vec<TriggerReport>,
}

/// Counts by kind.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    /// Jobs.
    pub jobs: usize,
    /// Triggers (recovery runs included).
    pub triggers: usize,
    /// Calendars (embedded bases included).
    pub calendars: usize,
    /// Paused trigger groups.
    pub paused_groups: usize,
    /// One-shot recovery runs made from fires a node was running.
    pub recovery_runs: usize,
}

/// One item and why it is in its list.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Item {
    /// `job`, `trigger`, `calendar`, `paused group` or `fired trigger`.
    pub kind: &'static str,
    /// `group.name`, or the name.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// A job that needs its class mapped to a command or URL.
#[derive(Debug, Clone, Serialize)]
pub struct NeedsMapping {
    /// `group.name`.
    pub job: String,
    /// The Quartz class.
    pub class: String,
}

/// A trigger as imported.
#[derive(Debug, Clone, Serialize)]
pub struct TriggerReport {
    /// `group.name`.
    pub trigger: String,
    /// `group.name` of its job.
    pub job: String,
    /// The zone its fire times are shown in.
    pub time_zone: String,
    /// waiting or paused.
    pub state: &'static str,
    /// The next fire times, in its zone.
    pub next_fires: Vec<String>,
}

impl Report {
    fn skip(&mut self, kind: &'static str, name: impl Into<String>, reason: impl Into<String>) {
        self.skipped.push(Item {
            kind,
            name: name.into(),
            reason: reason.into(),
        });
    }

    fn fail(&mut self, kind: &'static str, name: impl Into<String>, reason: impl Into<String>) {
        self.failed.push(Item {
            kind,
            name: name.into(),
            reason: reason.into(),
        });
    }
}

/// An instant PostgreSQL's timestamptz can hold too (years 1 to 9999).
fn millis(ms: i64) -> Option<Timestamp> {
    const YEAR_1: i64 = -62_135_596_800_000;
    (ms >= YEAR_1)
        .then(|| Timestamp::from_millisecond(ms).ok())
        .flatten()
}

/// A blob's bytes, or why it cannot be read.
fn blob(stored: &Blob) -> Result<Option<&[u8]>, String> {
    stored
        .as_ref()
        .map(|bytes| bytes.as_deref())
        .map_err(ToString::to_string)
}

/// A map as the JSON text kept for it.
fn json_text(map: Map<String, Value>) -> Result<Box<RawValue>, String> {
    serde_json::value::to_raw_value(&map).map_err(|e| format!("its data as JSON: {e}"))
}

fn full(group: &str, name: &str) -> String {
    format!("{group}.{name}")
}

/// Plans the import of `store`.
pub fn plan(store: &QuartzStore, options: &PlanOptions) -> Plan {
    let mut report = Report {
        scheduler: store.scheduler.clone(),
        tables: store.tables.clone(),
        ..Report::default()
    };
    if store.nodes.is_empty() {
        report.warnings.push(
            "no Quartz node checks in to this store (it is not clustered): the import cannot \
             tell whether a node still runs on it, so make sure every node is stopped"
                .into(),
        );
    }
    let calendars = plan_calendars(&store.calendars, options, &mut report);
    let calendar_names: HashMap<&str, &PlannedCalendar> =
        calendars.iter().map(|c| (c.name.as_str(), c)).collect();
    let jobs = plan_jobs(&store.jobs, options, &mut report);
    let job_index: HashMap<(&str, &str), &PlannedJob> = jobs
        .iter()
        .map(|j| ((j.group.as_str(), j.name.as_str()), j))
        .collect();
    let all_groups_paused = store.paused_groups.iter().any(|g| g == ALL_GROUPS_PAUSED);
    let paused_groups: Vec<String> = store
        .paused_groups
        .iter()
        .filter(|g| *g != ALL_GROUPS_PAUSED)
        .filter(|g| match check_name("paused trigger group", g) {
            Ok(()) => true,
            Err(why) => {
                report.fail("paused group", g.as_str(), why);
                false
            }
        })
        .cloned()
        .collect();
    let mut triggers = Vec::new();
    let mut trigger_data: HashMap<(String, String), Box<RawValue>> = HashMap::new();
    for row in &store.triggers {
        let key = full(&row.group, &row.name);
        match plan_trigger(row, &job_index, &calendar_names, options, &mut report) {
            Ok(Some(trigger)) => {
                trigger_data.insert((row.group.clone(), row.name.clone()), trigger.data.clone());
                triggers.push(trigger);
            }
            Ok(None) => {}
            Err(Failure::Skip(why)) => report.skip("trigger", key, why),
            Err(Failure::Fail(why)) => report.fail("trigger", key, why),
        }
    }
    // Data of triggers not imported (complete ones) still goes to their recovery runs.
    let recovered: HashSet<(&str, &str)> = store
        .fired
        .iter()
        .map(|f| (f.trigger_group.as_str(), f.trigger_name.as_str()))
        .collect();
    for row in &store.triggers {
        let key = (row.group.clone(), row.name.clone());
        if !recovered.contains(&(row.group.as_str(), row.name.as_str()))
            || trigger_data.contains_key(&key)
        {
            continue;
        }
        let bytes = match blob(&row.data) {
            Ok(bytes) => bytes,
            Err(why) => {
                report.fail("trigger data", full(&row.group, &row.name), why);
                continue;
            }
        };
        if let Ok(decoded) = job_data::decode(bytes)
            && let Ok(text) = json_text(decoded.data)
        {
            trigger_data.insert(key, text);
        }
    }
    for fired in &store.fired {
        if let Some(run) = plan_recovery(fired, &job_index, &trigger_data, &mut report) {
            triggers.push(run);
        }
    }
    for trigger in &mut triggers {
        // A group paused in Quartz holds its triggers paused (Quartz wrote them PAUSED; this
        // keeps a hand-edited store consistent too).
        if trigger.state == "waiting"
            && (all_groups_paused || paused_groups.contains(&trigger.group))
        {
            trigger.state = "paused";
        }
    }
    for trigger in &triggers {
        report
            .triggers
            .push(trigger_report(trigger, &calendar_names));
    }
    report.imported = Counts {
        jobs: jobs.len(),
        triggers: triggers.len(),
        calendars: calendars.len(),
        paused_groups: paused_groups.len(),
        recovery_runs: triggers
            .iter()
            .filter(|t| t.group == RECOVERING_JOBS_GROUP)
            .count(),
    };
    Plan {
        calendars,
        jobs,
        triggers,
        paused_groups,
        all_groups_paused,
        report,
    }
}

/// Why one item is not imported: skipped (what Quartz itself would no longer run) or failed
/// (what chime cannot read, which stops the import unless `--skip-unreadable`).
enum Failure {
    Skip(String),
    Fail(String),
}

fn plan_calendars(
    rows: &[CalendarRow],
    options: &PlanOptions,
    report: &mut Report,
) -> Vec<PlannedCalendar> {
    let mut planned = Vec::new();
    let stored: HashSet<String> = rows.iter().map(|r| r.name.clone()).collect();
    for row in rows {
        if let Err(why) = check_name("calendar name", &row.name) {
            report.fail("calendar", row.name.as_str(), why);
            continue;
        }
        let decoded = blob(&row.blob).and_then(|bytes| {
            calendars::decode(bytes.unwrap_or_default(), options.jvm_zone.as_deref())
                .map_err(|e| e.to_string())
        });
        let decoded = match decoded {
            Ok(decoded) => decoded,
            Err(why) => {
                report.fail("calendar", row.name.as_str(), why);
                continue;
            }
        };
        let definition = decoded.to_spec();
        if let Err(error) = Calendar::compile(&definition) {
            report.fail("calendar", row.name.as_str(), error.to_string());
            continue;
        }
        for warning in decoded.all_warnings() {
            report
                .warnings
                .push(format!("calendar {}: {warning}", row.name));
        }
        // Quartz copied the base calendar into this one when it was stored: it is shown as a
        // calendar of its own, and this one keeps its copy, as Quartz does.
        let mut level: Option<&DecodedCalendar> = decoded.base.as_deref();
        let mut name = row.name.clone();
        while let Some(base) = level {
            name.push_str(".base");
            if stored.contains(&name) {
                // A stored calendar (read or not) keeps its name: its triggers never get another.
                report.warnings.push(format!(
                    "calendar {}: its embedded base calendar is not shown on its own, since a \
                     stored calendar is named {name} (the copy stays chained)",
                    row.name
                ));
            } else if check_name("calendar name", &name).is_ok() {
                report.warnings.push(format!(
                    "calendar {}: its embedded base calendar ({}) is also calendar {name}",
                    row.name,
                    base.class.rsplit('.').next().unwrap_or(&base.class)
                ));
                planned.push(PlannedCalendar {
                    name: name.clone(),
                    definition: base.to_spec(),
                    description: base.description.clone().unwrap_or_default(),
                    generated: true,
                });
            }
            level = base.base.as_deref();
        }
        planned.push(PlannedCalendar {
            name: row.name.clone(),
            definition,
            description: decoded.description.clone().unwrap_or_default(),
            generated: false,
        });
    }
    // Two calendars may embed bases of the same generated name: the first is written.
    let mut seen = HashSet::new();
    planned.retain(|c| seen.insert(c.name.clone()));
    planned
}

fn plan_jobs(rows: &[JobRow], options: &PlanOptions, report: &mut Report) -> Vec<PlannedJob> {
    let mut planned = Vec::new();
    for row in rows {
        let key = full(&row.group, &row.name);
        if let Err(why) =
            check_name("job group", &row.group).and_then(|()| check_name("job name", &row.name))
        {
            report.fail("job", key, why);
            continue;
        }
        let decoded = blob(&row.data).and_then(|bytes| {
            let decoded = job_data::decode(bytes).map_err(|e| e.to_string())?;
            Ok((json_text(decoded.data)?, decoded.warnings))
        });
        let data = match decoded {
            Ok((data, warnings)) => {
                for warning in warnings {
                    report.warnings.push(format!("job {key}: {warning}"));
                }
                data
            }
            Err(why) => {
                report.fail("job", key, why);
                continue;
            }
        };
        let (kind, spec, paused) = match options.mappings.get(&row.class) {
            Some(Target::Shell(command)) => ("shell", json!({ "command": command }), false),
            Some(Target::Http(url)) => (
                "http",
                json!({ "url": url, "method": "POST", "send_data": true }),
                false,
            ),
            None => {
                report.needs_mapping.push(NeedsMapping {
                    job: key.clone(),
                    class: row.class.clone(),
                });
                (
                    "shell",
                    json!({ "command": unmapped_command(&row.class) }),
                    true,
                )
            }
        };
        planned.push(PlannedJob {
            group: row.group.clone(),
            name: row.name.clone(),
            description: row.description.clone().unwrap_or_default(),
            class: row.class.clone(),
            kind: kind.to_string(),
            spec,
            concurrent: !row.nonconcurrent,
            persist_data: row.update_data,
            requests_recovery: row.requests_recovery,
            durable: row.durable,
            paused,
            data,
        });
    }
    planned
}

/// What an unmapped job runs if resumed before it is given a command: it fails, saying why, so
/// it never passes for a job that ran.
fn unmapped_command(class: &str) -> String {
    let shown = class.replace('\'', "'\\''");
    format!(
        "echo 'Quartz job class {shown} has no chime command: set one with chime job update' >&2; exit 1"
    )
}

fn plan_trigger(
    row: &TriggerRow,
    jobs: &HashMap<(&str, &str), &PlannedJob>,
    calendars: &HashMap<&str, &PlannedCalendar>,
    options: &PlanOptions,
    report: &mut Report,
) -> Result<Option<PlannedTrigger>, Failure> {
    check_name("trigger group", &row.group)
        .and_then(|()| check_name("trigger name", &row.name))
        .map_err(Failure::Fail)?;
    let Some(job) = jobs.get(&(row.job_group.as_str(), row.job_name.as_str())) else {
        return Err(Failure::Skip(format!(
            "its job {} is not imported",
            full(&row.job_group, &row.job_name)
        )));
    };
    let state = match row.state.as_str() {
        "WAITING" | "ACQUIRED" | "BLOCKED" | "MISFIRED" => "waiting",
        "PAUSED" | "PAUSED_BLOCKED" => "paused",
        "ERROR" => {
            report.warnings.push(format!(
                "trigger {}: Quartz had it in ERROR (its job class could not be loaded): imported paused",
                full(&row.group, &row.name)
            ));
            "paused"
        }
        "COMPLETE" => return Err(Failure::Skip("complete: it will not fire again".into())),
        other => {
            return Err(Failure::Fail(format!("unknown trigger state {other:?}")));
        }
    };
    let Some(next) = row.next_fire_time.and_then(millis) else {
        return Err(Failure::Skip(
            "no next fire time: it will not fire again".into(),
        ));
    };
    let calendar = match &row.calendar {
        None => None,
        Some(name) if calendars.contains_key(name.as_str()) => Some(name.clone()),
        Some(name) => {
            return Err(Failure::Skip(format!(
                "its calendar {name:?} is not imported"
            )));
        }
    };
    let start = millis(row.start_time)
        .ok_or_else(|| Failure::Fail(format!("START_TIME {} is out of range", row.start_time)))?;
    let end = row.end_time.and_then(millis);
    let data = job_data::decode(blob(&row.data).map_err(Failure::Fail)?)
        .map_err(|e| Failure::Fail(e.to_string()))?;
    for warning in &data.warnings {
        report.warnings.push(format!(
            "trigger {}: {warning}",
            full(&row.group, &row.name)
        ));
    }
    let mut data = data.data;
    let mut priority = row.priority.unwrap_or(5);
    let mut misfire_code = row.misfire_instruction.unwrap_or(0);
    let mut calendar_name = calendar;
    let (schedule, times_triggered) = match &row.detail {
        TriggerDetail::Simple {
            repeat_count,
            repeat_interval,
            times_triggered,
        } => (
            ScheduleSpec::Simple {
                interval_ms: *repeat_interval,
                repeat_count: *repeat_count,
                start_time: Some(start),
                end_time: end,
            },
            *times_triggered,
        ),
        TriggerDetail::Cron {
            expression,
            time_zone,
        } => (
            ScheduleSpec::Cron {
                cron: expression.clone(),
                time_zone: Some(zone_or_jvm(time_zone.as_deref(), options)?),
                start_time: Some(start),
                end_time: end,
            },
            0,
        ),
        TriggerDetail::Properties(props) if row.kind == "CAL_INT" => {
            calendar_interval(props, start, end, options)?
        }
        TriggerDetail::Properties(props) if row.kind == "DAILY_I" => {
            daily_time_interval(props, start, end, options)?
        }
        TriggerDetail::Properties(_) => {
            return Err(Failure::Skip(format!(
                "trigger type {:?} is a custom delegate's",
                row.kind
            )));
        }
        TriggerDetail::Blob(stored) => {
            let bytes = blob(stored).map_err(Failure::Fail)?;
            let decoded = blob_triggers::decode(
                bytes.unwrap_or_default(),
                options.jvm_zone.as_deref(),
            )
            .map_err(|e| match e {
                blob_triggers::BlobError::UnsupportedClass(class) => Failure::Skip(format!(
                    "a blob trigger of class {class}, not one of Quartz's four trigger classes"
                )),
                other => Failure::Fail(other.to_string()),
            })?;
            // The row's columns hold what the scheduler last wrote; the blob holds the rest.
            if data.is_empty() {
                data = decoded.job_data.data;
            }
            priority = row.priority.unwrap_or(decoded.priority);
            misfire_code = row
                .misfire_instruction
                .unwrap_or(decoded.misfire_instruction);
            if calendar_name.is_none()
                && let Some(name) = decoded.calendar_name
            {
                if !calendars.contains_key(name.as_str()) {
                    return Err(Failure::Skip(format!(
                        "its calendar {name:?} is not imported"
                    )));
                }
                calendar_name = Some(name);
            }
            (
                {
                    // Anchored at the row's start and end: the blob's may be older.
                    let mut schedule = decoded.schedule;
                    schedule.set_bounds(Some(start), end);
                    schedule
                },
                decoded.times_triggered,
            )
        }
        TriggerDetail::Missing => {
            return Err(Failure::Fail(format!(
                "its {} row is missing from the trigger type's own table",
                row.kind
            )));
        }
    };
    let compiled = Schedule::compile(&schedule, start).map_err(|e| Failure::Fail(e.to_string()))?;
    let policy = misfire_policy(&schedule, misfire_code).map_err(Failure::Fail)?;
    policy
        .check(&compiled)
        .map_err(|e| Failure::Fail(e.to_string()))?;
    let mut trigger = PlannedTrigger {
        group: row.group.clone(),
        name: row.name.clone(),
        job_group: row.job_group.clone(),
        job_name: row.job_name.clone(),
        description: row.description.clone().unwrap_or_default(),
        schedule,
        calendar: calendar_name,
        misfire_policy: policy,
        priority,
        state: if job.paused { "paused" } else { state },
        start_time: start,
        next_fire_time: next,
        prev_fire_time: row.prev_fire_time.and_then(millis),
        times_triggered,
        data: json_text(data).map_err(Failure::Fail)?,
    };
    let calendar = trigger
        .calendar
        .as_deref()
        .and_then(|c| calendars.get(c))
        .and_then(|c| Calendar::compile(&c.definition).ok());
    if state == "waiting" {
        apply_misfire(&mut trigger, &compiled, calendar.as_ref(), options, report);
        if trigger.state == "complete" {
            return Err(Failure::Skip(
                "its misfire policy leaves it no fire time".into(),
            ));
        }
    }
    end_at_quartz_last_fire(&mut trigger, &compiled, calendar.as_ref(), report)?;
    Ok(Some(trigger))
}

/// Quartz can fire a daily-time-interval trigger once after its end time
/// ([`Schedule::quartz_fire_past_end`]); chime never fires after the end, so the end moves to
/// that fire, and the trigger fires as Quartz would.
fn end_at_quartz_last_fire(
    trigger: &mut PlannedTrigger,
    schedule: &Schedule,
    calendar: Option<&Calendar>,
    report: &mut Report,
) -> Result<(), Failure> {
    let Some(last) =
        schedule.quartz_fire_past_end(trigger.next_fire_time, trigger.times_triggered, calendar)
    else {
        return Ok(());
    };
    let zone = trigger_zone(&trigger.schedule);
    let local = |t: Timestamp| in_zone(t, &zone);
    report.warnings.push(format!(
        "trigger {}: Quartz fires it once after its end time {}, at {}; imported with that as \
         its end time",
        full(&trigger.group, &trigger.name),
        schedule.end.map(local).unwrap_or_default(),
        local(last)
    ));
    trigger
        .schedule
        .set_bounds(Some(trigger.start_time), Some(last));
    Schedule::compile(&trigger.schedule, trigger.start_time)
        .map(drop)
        .map_err(|e| Failure::Fail(e.to_string()))
}

fn zone_or_jvm(java_id: Option<&str>, options: &PlanOptions) -> Result<String, Failure> {
    match java_id.map(str::trim).filter(|z| !z.is_empty()) {
        Some(id) => zones::to_chime(id).map_err(|e| Failure::Fail(e.to_string())),
        None => options.jvm_zone.clone().ok_or_else(|| {
            Failure::Fail(
                "it has no time zone of its own, so it runs in the Quartz nodes' zone: give \
                 --jvm-time-zone"
                    .into(),
            )
        }),
    }
}

fn unit(text: Option<&str>) -> Result<IntervalUnit, Failure> {
    let text = text.unwrap_or_default();
    IntervalUnit::from_quartz(text)
        .ok_or_else(|| Failure::Fail(format!("STR_PROP_1 {text:?} is not an interval unit")))
}

fn interval(props: &SimpleProperties) -> Result<i32, Failure> {
    props.ints[0]
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| Failure::Fail("INT_PROP_1 (the interval) is missing".into()))
}

fn calendar_interval(
    props: &SimpleProperties,
    start: Timestamp,
    end: Option<Timestamp>,
    options: &PlanOptions,
) -> Result<(ScheduleSpec, i64), Failure> {
    Ok((
        ScheduleSpec::CalendarInterval {
            interval: interval(props)?,
            unit: unit(props.strings[0].as_deref())?,
            time_zone: Some(zone_or_jvm(props.strings[1].as_deref(), options)?),
            preserve_hour_of_day_across_dst: props.bools[0].unwrap_or(false),
            skip_day_if_hour_does_not_exist: props.bools[1].unwrap_or(false),
            start_time: Some(start),
            end_time: end,
        },
        props.ints[1].unwrap_or(0),
    ))
}

/// `DAILY_I`: days of week in STR_PROP_2 (`java.util.Calendar` numbers, 1 = Sunday), the window
/// in STR_PROP_3 (`sH,sM,sS,eH,eM,eS`, read as Quartz reads it: parts missing at the end give
/// 00:00:00 and 23:59:59), and no zone at all: Quartz computes it in the JVM's.
fn daily_time_interval(
    props: &SimpleProperties,
    start: Timestamp,
    end: Option<Timestamp>,
    options: &PlanOptions,
) -> Result<(ScheduleSpec, i64), Failure> {
    const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    let days_of_week = match props.strings[1].as_deref() {
        None => None,
        Some(text) => Some(
            text.split(',')
                .map(|d| {
                    d.trim()
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| DAYS.get(n.wrapping_sub(1)))
                        .map(|d| (*d).to_string())
                        .ok_or_else(|| {
                            Failure::Fail(format!("STR_PROP_2 {text:?} is not a list of days 1-7"))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let window = props.strings[2].as_deref().unwrap_or_default();
    // Java's split drops trailing empty parts, so ",,," is no parts at all.
    let mut parts: Vec<&str> = window.split(',').collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    let number = |i: usize| -> Result<u32, Failure> {
        parts[i].trim().parse().map_err(|_| {
            Failure::Fail(format!("STR_PROP_3 {window:?} is not a time-of-day window"))
        })
    };
    let time = |from: usize| -> Result<String, Failure> {
        Ok(format!(
            "{:02}:{:02}:{:02}",
            number(from)?,
            number(from + 1)?,
            number(from + 2)?
        ))
    };
    let start_of_day = if parts.len() >= 3 {
        time(0)?
    } else {
        "00:00:00".into()
    };
    let end_of_day = if parts.len() >= 6 {
        time(3)?
    } else {
        "23:59:59".into()
    };
    let zone = options.jvm_zone.clone().ok_or_else(|| {
        Failure::Fail(
            "a daily-time-interval trigger runs in the Quartz nodes' zone: give --jvm-time-zone"
                .into(),
        )
    })?;
    Ok((
        ScheduleSpec::DailyTimeInterval {
            interval: interval(props)?,
            unit: unit(props.strings[0].as_deref())?,
            start_time_of_day: Some(start_of_day),
            end_time_of_day: Some(end_of_day),
            days_of_week,
            repeat_count: props.longs[0].unwrap_or(-1),
            time_zone: Some(zone),
            start_time: Some(start),
            end_time: end,
        },
        props.ints[1].unwrap_or(0),
    ))
}

/// Quartz's `MISFIRE_INSTR` for the trigger's kind.
pub(crate) fn misfire_policy(schedule: &ScheduleSpec, code: i32) -> Result<MisfirePolicy, String> {
    use MisfirePolicy as P;
    let simple = matches!(schedule, ScheduleSpec::Simple { .. });
    Ok(match (code, simple) {
        (-1, _) => P::FireAll,
        (0, _) => P::Smart,
        (1, _) => P::FireNow,
        (2, true) => P::RescheduleNowWithExistingCount,
        (2, false) => P::Skip,
        (3, true) => P::RescheduleNowWithRemainingCount,
        (4, true) => P::RescheduleNextWithRemainingCount,
        (5, true) => P::RescheduleNextWithExistingCount,
        _ => {
            return Err(format!(
                "MISFIRE_INSTR {code} is not a misfire instruction of a {} trigger",
                if simple { "simple" } else { "cron or interval" }
            ));
        }
    })
}

/// Applies the misfire policy to a trigger whose next fire is older than the threshold, as
/// Quartz does when a node starts; `state` becomes `complete` if nothing is left to fire.
fn apply_misfire(
    trigger: &mut PlannedTrigger,
    schedule: &Schedule,
    calendar: Option<&Calendar>,
    options: &PlanOptions,
    report: &mut Report,
) {
    if trigger.misfire_policy == MisfirePolicy::FireAll
        || !misfire::is_misfired(
            trigger.next_fire_time,
            options.now,
            options.misfire_threshold,
        )
    {
        return;
    }
    let before = trigger.next_fire_time;
    let mut outcome = misfire::apply(
        schedule,
        trigger.misfire_policy,
        trigger.next_fire_time,
        trigger.times_triggered,
        calendar,
        options.now,
    );
    if trigger.misfire_policy == MisfirePolicy::Skip && outcome.next_fire_time.is_none() {
        // A daily-time-interval trigger's fire Quartz finds past its end time (the end then
        // moves to it: `end_at_quartz_last_fire`).
        outcome.next_fire_time =
            schedule.quartz_daily_fire_after(options.now, trigger.times_triggered, calendar);
    }
    trigger.times_triggered = outcome.times_triggered;
    if let Some(restarted) = outcome.restarted_schedule(&trigger.schedule) {
        trigger.schedule = restarted;
        trigger.start_time = outcome.start;
    }
    let key = full(&trigger.group, &trigger.name);
    match outcome.next_fire_time {
        Some(next) => {
            trigger.next_fire_time = next;
            report.warnings.push(format!(
                "trigger {key}: misfired (due {before}), {} → next fire {next}",
                trigger.misfire_policy
            ));
        }
        None => trigger.state = "complete",
    }
}

fn plan_recovery(
    fired: &FiredRow,
    jobs: &HashMap<(&str, &str), &PlannedJob>,
    trigger_data: &HashMap<(String, String), Box<RawValue>>,
    report: &mut Report,
) -> Option<PlannedTrigger> {
    let entry = format!(
        "{} ({}.{} on {})",
        fired.entry_id, fired.trigger_group, fired.trigger_name, fired.instance
    );
    if fired.state != "EXECUTING" {
        report.skip(
            "fired trigger",
            entry,
            format!(
                "{}: acquired, not started; its trigger fires it",
                fired.state
            ),
        );
        return None;
    }
    let (Some(job_group), Some(job_name)) = (&fired.job_group, &fired.job_name) else {
        report.skip("fired trigger", entry, "executing, with no job recorded");
        return None;
    };
    if !fired.requests_recovery {
        report.skip(
            "fired trigger",
            entry,
            "was executing when Quartz stopped; its job does not request recovery",
        );
        return None;
    }
    let Some(job) = jobs.get(&(job_group.as_str(), job_name.as_str())) else {
        report.skip(
            "fired trigger",
            entry,
            format!("its job {} is not imported", full(job_group, job_name)),
        );
        return None;
    };
    let (Some(sched), Some(_)) = (millis(fired.sched_time), millis(fired.fired_time)) else {
        report.skip("fired trigger", entry, "its times are out of range");
        return None;
    };
    let mut data: Map<String, Value> = trigger_data
        .get(&(fired.trigger_group.clone(), fired.trigger_name.clone()))
        .and_then(|text| serde_json::from_str(text.get()).ok())
        .unwrap_or_default();
    let keys: BTreeMap<&str, String> = BTreeMap::from([
        (
            "QRTZ_FAILED_JOB_ORIG_TRIGGER_NAME",
            fired.trigger_name.clone(),
        ),
        (
            "QRTZ_FAILED_JOB_ORIG_TRIGGER_GROUP",
            fired.trigger_group.clone(),
        ),
        (
            "QRTZ_FAILED_JOB_ORIG_TRIGGER_FIRETIME_IN_MILLISECONDS_AS_STRING",
            fired.fired_time.to_string(),
        ),
        (
            "QRTZ_FAILED_JOB_ORIG_TRIGGER_SCHEDULED_FIRETIME_IN_MILLISECONDS_AS_STRING",
            fired.sched_time.to_string(),
        ),
    ]);
    for (key, value) in keys {
        data.insert(key.to_string(), Value::String(value));
    }
    let name = format!("recover_{}", fired.entry_id);
    if let Err(why) = check_name("trigger name", &name) {
        report.fail("fired trigger", entry, why);
        return None;
    }
    let data = match json_text(data) {
        Ok(data) => data,
        Err(why) => {
            report.fail("fired trigger", entry, why);
            return None;
        }
    };
    Some(PlannedTrigger {
        group: RECOVERING_JOBS_GROUP.into(),
        name,
        job_group: job_group.clone(),
        job_name: job_name.clone(),
        description: format!(
            "recovery of {}.{} fired at {sched} on {}",
            fired.trigger_group, fired.trigger_name, fired.instance
        ),
        schedule: ScheduleSpec::Simple {
            interval_ms: 0,
            repeat_count: 0,
            start_time: Some(sched),
            end_time: None,
        },
        calendar: None,
        misfire_policy: MisfirePolicy::FireAll,
        priority: fired.priority,
        state: if job.paused { "paused" } else { "waiting" },
        start_time: sched,
        next_fire_time: sched,
        prev_fire_time: None,
        times_triggered: 0,
        data,
    })
}

/// The next fire times of a planned trigger, as chime's scheduler will fire it: the stored next
/// fire first, then each after it by the schedule's arithmetic from the start time.
pub fn next_fires(
    trigger: &PlannedTrigger,
    calendar: Option<&CalendarSpec>,
    count: usize,
) -> Vec<Timestamp> {
    let Ok(schedule) = Schedule::compile(&trigger.schedule, trigger.start_time) else {
        return Vec::new();
    };
    let calendar = calendar.and_then(|c| Calendar::compile(c).ok());
    let mut fires = Vec::with_capacity(count);
    let mut next = Some(trigger.next_fire_time);
    let mut times = trigger.times_triggered;
    while let Some(at) = next {
        if fires.len() >= count {
            break;
        }
        fires.push(at);
        times += 1;
        next = schedule.next_fire_time(at, times, calendar.as_ref());
    }
    fires
}

fn trigger_report(
    trigger: &PlannedTrigger,
    calendars: &HashMap<&str, &PlannedCalendar>,
) -> TriggerReport {
    let calendar = trigger
        .calendar
        .as_deref()
        .and_then(|c| calendars.get(c))
        .map(|c| &c.definition);
    let zone = trigger_zone(&trigger.schedule);
    TriggerReport {
        trigger: full(&trigger.group, &trigger.name),
        job: full(&trigger.job_group, &trigger.job_name),
        next_fires: next_fires(trigger, calendar, REPORTED_FIRES)
            .into_iter()
            .map(|t| in_zone(t, &zone))
            .collect(),
        time_zone: trigger.schedule.time_zone().to_string(),
        state: trigger.state,
    }
}

/// The zone a trigger's times are reported in (its schedule's; UTC for a simple trigger).
fn trigger_zone(schedule: &ScheduleSpec) -> jiff::tz::TimeZone {
    chime_core::schedule::named_zone(schedule.time_zone()).unwrap_or(jiff::tz::TimeZone::UTC)
}

/// A time as the report shows it, in `zone`, to the millisecond.
fn in_zone(t: Timestamp, zone: &jiff::tz::TimeZone) -> String {
    t.to_zoned(zone.clone())
        .strftime("%Y-%m-%d %H:%M:%S%.3f %:z")
        .to_string()
}
