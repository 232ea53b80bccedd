//! Backfills: a task for every fire time of a job's triggers in a range (`chime backfill`),
//! run `parallelism` at a time; their downstream jobs advance as usual.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use utoipa::ToSchema;

use super::dependencies::data_time_of;
use super::{Context, Store, StoreError, task_lifecycle};
use crate::bus::Topology;
use crate::schedule::{Calendar, CalendarSpec, Schedule, ScheduleSpec};

/// The most tasks one backfill makes.
pub const MAX_BACKFILL_TASKS: usize = 10_000;

/// A backfill as the API takes it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBackfill {
    /// The range's start (inclusive).
    #[schema(value_type = String)]
    pub from: Timestamp,
    /// The range's end (inclusive).
    #[schema(value_type = String)]
    pub to: Timestamp,
    /// Downstream jobs with triggers of their own also run for these data times.
    #[serde(default)]
    pub with_downstream: bool,
    /// How many run at once (default 1: serial).
    #[serde(default)]
    pub parallelism: Option<i32>,
}

/// A backfill made.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BackfillView {
    /// Its id.
    pub id: i64,
    /// The job, `group.name`.
    pub job: String,
    /// How many tasks it made.
    pub tasks: usize,
    /// Its first and last data times.
    #[schema(value_type = Vec<String>)]
    pub data_times: Vec<Timestamp>,
}

#[derive(sqlx::FromRow)]
struct JobTrigger {
    job_id: i64,
    data_time_period: Option<String>,
    schedule: Option<Json<ScheduleSpec>>,
    start_time: Option<jiff_sqlx::Timestamp>,
    calendar: Option<Json<CalendarSpec>>,
}

/// Backfills job `group.name` over `backfill.from ..= backfill.to`.
pub async fn create(
    store: &Store,
    topology: &Topology,
    group: &str,
    name: &str,
    backfill: NewBackfill,
) -> Result<BackfillView, StoreError> {
    if backfill.to < backfill.from {
        return Err(StoreError::Invalid(format!(
            "--to {} is before --from {}",
            backfill.to, backfill.from
        )));
    }
    let parallelism = backfill.parallelism.unwrap_or(1);
    if parallelism < 1 {
        return Err(StoreError::Invalid("parallelism must be at least 1".into()));
    }
    let triggers: Vec<JobTrigger> = sqlx::query_as(
        "SELECT j.id AS job_id, j.data_time_period, t.schedule, t.start_time,
                c.definition AS calendar
         FROM jobs j LEFT JOIN triggers t ON t.job_id = j.id
              LEFT JOIN calendars c ON c.name = t.calendar_name
         WHERE j.group_name = $1 AND j.name = $2",
    )
    .bind(group)
    .bind(name)
    .fetch_all(store.pool())
    .await
    .context("reading the job's triggers")?;
    let Some(job_id) = triggers.first().map(|t| t.job_id) else {
        return Err(StoreError::NotFound(format!("job {group}.{name}")));
    };
    let mut times = std::collections::BTreeSet::new();
    for trigger in &triggers {
        let (Some(schedule), Some(start)) = (&trigger.schedule, trigger.start_time) else {
            continue;
        };
        // A backfill reaches before the trigger was created: its schedule starts at `from`
        // unless it names its own start.
        let default_start = start.to_jiff().min(backfill.from);
        let Ok(schedule) = Schedule::compile(&schedule.0, default_start) else {
            continue;
        };
        let calendar = trigger
            .calendar
            .as_ref()
            .and_then(|c| Calendar::compile(&c.0).ok());
        for fire in schedule.fire_times_between(
            calendar.as_ref(),
            backfill.from,
            backfill.to,
            MAX_BACKFILL_TASKS + 1,
        ) {
            times.insert(data_time_of(trigger.data_time_period.as_deref(), fire));
        }
    }
    if times.is_empty() {
        return Err(StoreError::Invalid(format!(
            "job {group}.{name} has no trigger fire time between {} and {}",
            backfill.from, backfill.to
        )));
    }
    if times.len() > MAX_BACKFILL_TASKS {
        return Err(StoreError::Invalid(format!(
            "the range holds more than {MAX_BACKFILL_TASKS} fire times; backfill a shorter range"
        )));
    }
    let times: Vec<Timestamp> = times.into_iter().collect();
    let id = task_lifecycle::create_backfill(
        store,
        topology,
        job_id,
        (backfill.from, backfill.to),
        parallelism,
        backfill.with_downstream,
        &times,
    )
    .await?;
    let ends = match (times.first(), times.last()) {
        (Some(first), Some(last)) => vec![*first, *last],
        _ => Vec::new(),
    };
    Ok(BackfillView {
        id,
        job: format!("{group}.{name}"),
        tasks: times.len(),
        data_times: ends,
    })
}
