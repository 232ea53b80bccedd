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
        "SELECT j.id AS job_id,
                period_in_zone(j.data_time_period, j.data_time_zone) AS data_time_period,
                t.schedule, t.start_time,
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

/// A backfill and how far it has come.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BackfillProgress {
    /// Its id.
    pub id: i64,
    /// The job, `group.name`.
    pub job: String,
    /// The range's start.
    #[schema(value_type = String, format = DateTime)]
    pub from: Timestamp,
    /// The range's end.
    #[schema(value_type = String, format = DateTime)]
    pub to: Timestamp,
    /// How many run at once.
    pub parallelism: i32,
    /// Whether downstream jobs run too.
    pub with_downstream: bool,
    /// When it was made.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// Its tasks (and their downstream tasks) by status.
    pub tasks: std::collections::BTreeMap<String, i64>,
    /// Whether every task has ended.
    pub done: bool,
}

#[derive(sqlx::FromRow)]
struct ProgressRow {
    id: i64,
    job: String,
    from_time: jiff_sqlx::Timestamp,
    to_time: jiff_sqlx::Timestamp,
    parallelism: i32,
    with_downstream: bool,
    created_at: jiff_sqlx::Timestamp,
    counts: Json<std::collections::BTreeMap<String, i64>>,
}

impl From<ProgressRow> for BackfillProgress {
    fn from(r: ProgressRow) -> Self {
        let counts = r.counts.0;
        let done = ["waiting", "ready", "running", "retrying"]
            .iter()
            .all(|s| counts.get(*s).copied().unwrap_or(0) == 0);
        Self {
            id: r.id,
            job: r.job,
            from: r.from_time.to_jiff(),
            to: r.to_time.to_jiff(),
            parallelism: r.parallelism,
            with_downstream: r.with_downstream,
            created_at: r.created_at.to_jiff(),
            tasks: counts,
            done,
        }
    }
}

/// `SELECT` backfills `{where}` with their tasks counted by status (on the backfill index).
macro_rules! select_progress {
    ($where:literal) => {
        concat!(
            "SELECT b.id, j.group_name || '.' || j.name AS job, b.from_time, b.to_time,
                    b.parallelism, b.with_downstream, b.created_at,
                    coalesce((SELECT jsonb_object_agg(status, n) FROM (
                        SELECT status, count(*) AS n FROM tasks
                        WHERE backfill_id = b.id GROUP BY status) c), '{}') AS counts
             FROM backfills b JOIN jobs j ON j.id = b.job_id ",
            $where
        )
    };
}

/// The newest backfills first, at most `limit`.
pub async fn list(store: &Store, limit: i64) -> Result<Vec<BackfillProgress>, StoreError> {
    let rows: Vec<ProgressRow> = sqlx::query_as(select_progress!("ORDER BY b.id DESC LIMIT $1"))
        .bind(limit.clamp(1, 1000))
        .fetch_all(store.pool())
        .await
        .context("listing backfills")?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// One backfill.
pub async fn get(store: &Store, id: i64) -> Result<BackfillProgress, StoreError> {
    let row: Option<ProgressRow> = sqlx::query_as(select_progress!("WHERE b.id = $1"))
        .bind(id)
        .fetch_optional(store.pool())
        .await
        .context("reading the backfill")?;
    row.map(Into::into)
        .ok_or_else(|| StoreError::NotFound(format!("backfill {id}")))
}

/// Cancels a backfill: its tasks that have not ended are killed (running ones through their
/// workers), as `chime task kill` would kill each. Returns how many were killed or signalled.
pub async fn cancel(store: &Store, topology: &Topology, id: i64) -> Result<u64, StoreError> {
    get(store, id).await?;
    task_lifecycle::kill_backfill(store, topology, id).await
}
