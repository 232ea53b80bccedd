//! Jobs: what to run (kind, spec, worker group, retry budgets), named by (group, name) as in
//! Quartz. A job fires through its triggers, or runs on demand (`chime job run`).

use serde::{Deserialize, Serialize};
use sqlx::FromRow;
use sqlx::types::Json;
use utoipa::ToSchema;

use super::patch::Change;
use super::{Context, Store, StoreError, kind_routes};
use crate::config::is_valid_name;
use crate::model::kinds::validate_builtin_spec;
use crate::model::{Backoff, MAX_PAYLOAD_BYTES, check_json, check_opt_text};

/// A job's or a trigger's priority when none is given.
pub const DEFAULT_PRIORITY: i32 = 5;
/// The wait before a rejected or failed task runs again when none is given.
pub const DEFAULT_RETRY_INTERVAL_MS: i64 = 3000;

/// A job as the API takes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewJob {
    /// Group (default `default`).
    #[serde(default, deserialize_with = "crate::model::names::deserialize_nfc_opt")]
    pub group: Option<String>,
    /// Name, unique in its group.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Executor kind.
    pub kind: String,
    /// The executor's input.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// Worker group (default: the kind's route, else `default`).
    #[serde(default)]
    pub worker_group: Option<String>,
    /// Higher runs first (default 5).
    #[serde(default)]
    pub priority: Option<i32>,
    /// false = one task at a time (Quartz's DisallowConcurrentExecution).
    #[serde(default)]
    pub concurrent: Option<bool>,
    /// Re-run a task whose worker died.
    #[serde(default)]
    pub requests_recovery: Option<bool>,
    /// Data passed to every task.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// Retries after rejections.
    #[serde(default)]
    pub reject_retries: Option<i32>,
    /// Wait before a rejected task is offered again.
    #[serde(default)]
    pub reject_interval_ms: Option<i64>,
    /// Retries after failures.
    #[serde(default)]
    pub failed_retries: Option<i32>,
    /// Wait before a failed task runs again.
    #[serde(default)]
    pub failed_interval_ms: Option<i64>,
    /// How the failed interval grows.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Timeout of one attempt.
    #[serde(default)]
    pub timeout_ms: Option<i64>,
    /// minute, hour, day, week or month: data times are truncated to it.
    #[serde(default)]
    pub data_time_period: Option<String>,
    /// The IANA zone the data-time period is taken in (default UTC): a daily job in
    /// Asia/Shanghai has its data times at local midnight.
    #[serde(default)]
    pub data_time_zone: Option<String>,
    /// The OS user tasks run as.
    #[serde(default)]
    pub execute_user: Option<String>,
    /// Keep this job's ended tasks this many days (default: the installation's retention).
    #[serde(default)]
    pub retention_days: Option<i32>,
    /// Notify the webhooks (`job.success_overdue`) when the job has not succeeded for this
    /// long: since its latest success, or since the window was set.
    #[serde(default)]
    pub expect_success_within_ms: Option<i64>,
}

/// A stored job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    /// Its id.
    pub id: i64,
    /// Group.
    pub group: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Executor kind.
    pub kind: String,
    /// The executor's input.
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// Worker group.
    pub worker_group: String,
    /// Priority.
    pub priority: i32,
    /// Whether tasks may overlap.
    pub concurrent: bool,
    /// Whether a task whose worker died re-runs.
    pub requests_recovery: bool,
    /// Whether its triggers are paused.
    pub paused: bool,
    /// Timeout of one attempt.
    pub timeout_ms: Option<i64>,
    /// The data-time period its data times are truncated to (`minute`, `hour`, `day`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_time_period: Option<String>,
    /// The zone of the data-time period.
    #[serde(default = "utc")]
    pub data_time_zone: String,
    /// How many days its ended tasks are kept, if not the installation's retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<i32>,
    /// The longest it may go without a success before the webhooks are told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_success_within_ms: Option<i64>,
    /// Retries after a rejection.
    #[serde(default)]
    pub reject_retries: i32,
    /// Retries after a failure.
    #[serde(default)]
    pub failed_retries: i32,
    /// The user its commands run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute_user: Option<String>,
    /// The job's data (every task's data starts from it).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// The definitions source that made or last changed it (`chime apply --source`); absent:
    /// made by hand. A job with a source is overwritten by that source's next apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// How many triggers it has (in lists and `get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<i64>,
    /// The earliest next fire of its waiting triggers (in lists and `get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_fire_time: Option<jiff::Timestamp>,
    /// Its task of the latest data time (in lists and `get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
    /// The statuses of its tasks for its latest data times, newest first (at most 10; in lists
    /// and `get`): its recent history at a glance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_runs: Vec<String>,
}

fn utc() -> String {
    "UTC".into()
}

/// A job's task of its latest data time.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LastRun {
    /// The task.
    pub task_id: uuid::Uuid,
    /// Its status.
    pub status: String,
    /// Its data time.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<jiff::Timestamp>,
}

#[derive(FromRow)]
struct JobRow {
    id: i64,
    group_name: String,
    name: String,
    description: String,
    kind: String,
    spec: Json<serde_json::Value>,
    worker_group: String,
    priority: i32,
    concurrent: bool,
    requests_recovery: bool,
    paused: bool,
    timeout_ms: Option<i64>,
    data_time_period: Option<String>,
    data_time_zone: String,
    retention_days: Option<i32>,
    expect_success_within_ms: Option<i64>,
    reject_retries: i32,
    failed_retries: i32,
    execute_user: Option<String>,
    data: Json<serde_json::Value>,
    source: Option<String>,
    #[sqlx(default)]
    trigger_count: Option<i64>,
    #[sqlx(default)]
    next_fire_time: Option<jiff_sqlx::Timestamp>,
    #[sqlx(default)]
    last_task_id: Option<uuid::Uuid>,
    #[sqlx(default)]
    last_task_status: Option<String>,
    #[sqlx(default)]
    last_data_time: Option<jiff_sqlx::Timestamp>,
    #[sqlx(default)]
    recent_runs: Option<Vec<String>>,
}

impl From<JobRow> for JobView {
    fn from(r: JobRow) -> Self {
        Self {
            id: r.id,
            group: r.group_name,
            name: r.name,
            description: r.description,
            kind: r.kind,
            spec: r.spec.0,
            worker_group: r.worker_group,
            priority: r.priority,
            concurrent: r.concurrent,
            requests_recovery: r.requests_recovery,
            paused: r.paused,
            timeout_ms: r.timeout_ms,
            data_time_period: r.data_time_period,
            data_time_zone: r.data_time_zone,
            retention_days: r.retention_days,
            expect_success_within_ms: r.expect_success_within_ms,
            reject_retries: r.reject_retries,
            failed_retries: r.failed_retries,
            execute_user: r.execute_user,
            data: r.data.0,
            source: r.source,
            triggers: r.trigger_count,
            next_fire_time: r.next_fire_time.map(|t| t.to_jiff()),
            last_run: match (r.last_task_id, r.last_task_status) {
                (Some(task_id), Some(status)) => Some(LastRun {
                    task_id,
                    status,
                    data_time: r.last_data_time.map(|t| t.to_jiff()),
                }),
                _ => None,
            },
            recent_runs: r.recent_runs.unwrap_or_default(),
        }
    }
}

const JOB_COLUMNS: &str = "id, group_name, name, description, kind, spec, worker_group, priority, \
                           concurrent, requests_recovery, paused, timeout_ms, data_time_period, \
                           data_time_zone, retention_days, expect_success_within_ms, \
                           reject_retries, failed_retries, execute_user, data, source";

/// `SELECT` jobs `{where}` with their trigger count, next fire and last run: each extra read on
/// an index (triggers by job; tasks by job and data time).
macro_rules! select_jobs_with_schedule {
    ($where:literal) => {
        concat!(
            "SELECT j.*, x.trigger_count, x.next_fire_time, l.id AS last_task_id,
                    l.status AS last_task_status, l.data_time AS last_data_time,
                    r.recent_runs
             FROM (SELECT id, group_name, name, description, kind, spec, worker_group, priority,
                          concurrent, requests_recovery, paused, timeout_ms, data_time_period,
                          data_time_zone, retention_days, expect_success_within_ms, reject_retries,
                          failed_retries, execute_user, data, source
                   FROM jobs ",
            $where,
            ") j
             LEFT JOIN LATERAL (
                 SELECT count(*) AS trigger_count,
                        min(next_fire_time) FILTER (WHERE state = 'waiting') AS next_fire_time
                 FROM triggers WHERE job_id = j.id
             ) x ON true
             LEFT JOIN LATERAL (
                 SELECT id, status, data_time FROM tasks
                 WHERE job_id = j.id AND data_time IS NOT NULL
                 ORDER BY data_time DESC, id DESC LIMIT 1
             ) l ON true
             LEFT JOIN LATERAL (
                 SELECT array_agg(status ORDER BY data_time DESC, id DESC) AS recent_runs
                 FROM (SELECT status, data_time, id FROM tasks
                       WHERE job_id = j.id AND data_time IS NOT NULL
                       ORDER BY data_time DESC, id DESC LIMIT 10) recent
             ) r ON true
             ORDER BY j.group_name, j.name"
        )
    };
}

impl NewJob {
    /// Checks everything about the job that needs no database (names, numbers, the spec of a
    /// built-in kind, the data-time period and zone); `chime validate` runs it with no server.
    pub fn validate(&self) -> Result<(), StoreError> {
        let invalid = |m: String| Err(StoreError::Invalid(m));
        crate::model::check_name("job name", &self.name).map_err(StoreError::Invalid)?;
        if let Some(group) = &self.group {
            crate::model::check_name("job group", group).map_err(StoreError::Invalid)?;
        }
        if let Some(group) = &self.worker_group
            && !is_valid_name(group)
        {
            return invalid(format!(
                "worker group {group:?}: use 1-100 letters, digits, '-', '_' or '.'"
            ));
        }
        if !is_valid_name(&self.kind) {
            return invalid(format!(
                "kind {:?}: use 1-100 letters, digits, '-', '_' or '.'",
                self.kind
            ));
        }
        if let Some(user) = self.execute_user.as_deref().filter(|u| !u.is_empty())
            && !is_valid_name(user)
        {
            return invalid(format!(
                "execute_user {user:?}: use 1-100 letters, digits, '-', '_' or '.'"
            ));
        }
        let nul = |e: crate::model::NulInText| StoreError::Invalid(e.to_string());
        check_opt_text("description", self.description.as_deref()).map_err(nul)?;
        check_json("spec", &self.spec).map_err(nul)?;
        check_json("data", &self.data).map_err(nul)?;
        for (field, value) in [
            ("reject_retries", self.reject_retries.map(i64::from)),
            ("failed_retries", self.failed_retries.map(i64::from)),
            ("reject_interval_ms", self.reject_interval_ms),
            ("failed_interval_ms", self.failed_interval_ms),
        ] {
            if matches!(value, Some(n) if n < 0) {
                return invalid(format!("{field} must be zero or more"));
            }
        }
        if matches!(self.timeout_ms, Some(t) if t <= 0) {
            return invalid("timeout_ms must be positive".into());
        }
        if matches!(self.expect_success_within_ms,
            Some(t) if t <= 0 || t > super::webhooks::MAX_SUCCESS_WINDOW_MS)
        {
            return invalid(
                "expect_success_within_ms must be positive and at most ten years".into(),
            );
        }
        validate_builtin_spec(&self.kind, &self.spec)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        if self.spec.to_string().len() + self.data.to_string().len() > MAX_PAYLOAD_BYTES {
            return invalid(format!("spec and data are over {MAX_PAYLOAD_BYTES} bytes"));
        }
        if let Some(backoff) = &self.backoff {
            backoff
                .validate()
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
        }
        if let Some(period) = &self.data_time_period
            && !["minute", "hour", "day", "week", "month"].contains(&period.as_str())
        {
            return invalid(format!(
                "data_time_period {period:?}: use minute, hour, day, week or month"
            ));
        }
        if matches!(self.retention_days, Some(d) if d <= 0) {
            return invalid("retention_days must be positive".into());
        }
        if let Some(zone) = &self.data_time_zone
            && jiff::tz::TimeZone::get(zone).is_err()
        {
            return invalid(format!(
                "data_time_zone {zone:?} is not an IANA time zone (e.g. UTC, Asia/Shanghai)"
            ));
        }
        Ok(())
    }
}

/// Creates a job; a duplicate (group, name) is refused.
pub async fn create(store: &Store, job: NewJob) -> Result<JobView, StoreError> {
    let mut conn = store.pool().acquire().await.context("connecting")?;
    save(&mut conn, job, None, None).await
}

/// Replaces a job's settings (its group and name stay); running tasks keep the settings they
/// started with, later fires use the new ones.
pub async fn update(
    store: &Store,
    group: &str,
    name: &str,
    job: NewJob,
) -> Result<JobUpdate, StoreError> {
    let job = NewJob {
        group: Some(group.to_string()),
        name: name.to_string(),
        ..job
    };
    let (before, version) = settings(store, group, name).await?;
    let mut conn = store.pool().acquire().await.context("connecting")?;
    let view = save(&mut conn, job, Some(version), None).await;
    drop(conn);
    let view = view.map_err(|e| match e {
        StoreError::NotFound(_) => StoreError::Conflict(format!(
            "job {group}.{name} changed under the update; try again"
        )),
        e => e,
    })?;
    let (after, _) = settings(store, group, name).await?;
    let json = |job: &NewJob| serde_json::to_value(job).unwrap_or_default();
    Ok(JobUpdate {
        job: view,
        changes: super::patch::changes(&json(&before), &json(&after)),
    })
}

/// A job after an update, and what the update changed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobUpdate {
    /// The job as it is now.
    pub job: JobView,
    /// Each setting that changed, before and after (empty: nothing did).
    pub changes: Vec<Change>,
}

/// Changes only the settings `patch` names (a JSON merge patch over the job as [`NewJob`] has
/// it: `{"timeout_ms": 60000}` keeps the command, the budgets and the description); `null`
/// returns a setting to its default. Validated as a whole, like [`create`]; the job's group and
/// name cannot change. A concurrent update is not overwritten: the patch is laid again over it.
/// `may_run_as` says whether the caller may have commands run as the job's `execute_user` after
/// the patch (given or kept): changing the command of a job that runs as another user is
/// running as that user.
pub async fn patch(
    store: &Store,
    group: &str,
    name: &str,
    patch: &serde_json::Value,
    may_run_as: impl Fn(Option<&str>) -> Result<(), String>,
) -> Result<JobUpdate, StoreError> {
    // Each try reads the job and writes only if no one wrote it meanwhile (its row version).
    for _ in 0..5 {
        let (current, version) = settings(store, group, name).await?;
        let (before, mut after) = super::patch::apply(
            &current,
            patch,
            &["group", "name"],
            &["spec", "data", "backoff"],
            "job",
        )?;
        // A new kind finds its own worker group (its route), as a created job does, unless the
        // patch names one.
        if patch
            .get("kind")
            .is_some_and(|k| Some(k) != before.get("kind"))
            && patch.get("worker_group").is_none()
            && let Some(fields) = after.as_object_mut()
        {
            fields.remove("worker_group");
        }
        let job: NewJob = super::patch::settings(after, "job")?;
        may_run_as(job.execute_user.as_deref()).map_err(StoreError::Forbidden)?;
        let mut conn = store.pool().acquire().await.context("connecting")?;
        let saved = save(&mut conn, job, Some(version), None).await;
        drop(conn);
        match saved {
            Ok(view) => {
                let (now, _) = settings(store, group, name).await?;
                let after = serde_json::to_value(&now)
                    .map_err(|e| StoreError::Invalid(format!("reading the job: {e}")))?;
                return Ok(JobUpdate {
                    job: view,
                    changes: super::patch::changes(&before, &after),
                });
            }
            Err(StoreError::NotFound(_)) => continue,
            Err(error) => return Err(error),
        }
    }
    Err(StoreError::Conflict(format!(
        "job {group}.{name} kept changing under the update; try again"
    )))
}

/// A job's settings as [`NewJob`] has them, every default spelled out, and its row version.
async fn settings(store: &Store, group: &str, name: &str) -> Result<(NewJob, i64), StoreError> {
    #[derive(FromRow)]
    struct Row {
        version: i64,
        description: String,
        kind: String,
        spec: Json<serde_json::Value>,
        worker_group: String,
        priority: i32,
        concurrent: bool,
        requests_recovery: bool,
        data: Json<serde_json::Value>,
        reject_retries: i32,
        reject_interval_ms: i64,
        failed_retries: i32,
        failed_interval_ms: i64,
        backoff: Json<Backoff>,
        timeout_ms: Option<i64>,
        data_time_period: Option<String>,
        data_time_zone: String,
        execute_user: Option<String>,
        retention_days: Option<i32>,
        expect_success_within_ms: Option<i64>,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT xmin::text::bigint AS version, description, kind, spec, worker_group, priority,
                concurrent, requests_recovery, data, reject_retries, reject_interval_ms,
                failed_retries, failed_interval_ms, backoff, timeout_ms, data_time_period,
                data_time_zone, execute_user, retention_days, expect_success_within_ms
         FROM jobs WHERE group_name = $1 AND name = $2",
    )
    .bind(group)
    .bind(name)
    .fetch_optional(store.pool())
    .await
    .context("reading the job's settings")?;
    let Some(r) = row else {
        return Err(StoreError::NotFound(format!("job {group}.{name}")));
    };
    let job = NewJob {
        group: Some(group.to_string()),
        name: name.to_string(),
        description: Some(r.description).filter(|d| !d.is_empty()),
        kind: r.kind,
        spec: r.spec.0,
        worker_group: Some(r.worker_group),
        priority: Some(r.priority),
        concurrent: Some(r.concurrent),
        requests_recovery: Some(r.requests_recovery),
        data: r.data.0,
        reject_retries: Some(r.reject_retries),
        reject_interval_ms: Some(r.reject_interval_ms),
        failed_retries: Some(r.failed_retries),
        failed_interval_ms: Some(r.failed_interval_ms),
        backoff: Some(r.backoff.0),
        timeout_ms: r.timeout_ms,
        data_time_period: r.data_time_period,
        data_time_zone: Some(r.data_time_zone),
        execute_user: r.execute_user,
        retention_days: r.retention_days,
        expect_success_within_ms: r.expect_success_within_ms,
    };
    Ok((job, r.version))
}

/// Writes a job: a new one (`existing` None), or over the row of version `existing` (0: any
/// version). `source` is the definitions source that wrote it (None, by hand, keeps the one an
/// update's row had).
pub(crate) async fn save(
    conn: &mut sqlx::PgConnection,
    job: NewJob,
    existing: Option<i64>,
    source: Option<&str>,
) -> Result<JobView, StoreError> {
    job.validate()?;
    let worker_group =
        kind_routes::resolve_group(&mut *conn, &job.kind, job.worker_group.as_deref()).await?;
    let group = job.group.clone().unwrap_or_else(|| "default".into());
    let backoff = serde_json::to_value(job.backoff.clone().unwrap_or_default())
        .unwrap_or_else(|_| serde_json::json!({"kind": "fixed"}));
    let empty = |v: &serde_json::Value| {
        if v.is_null() {
            serde_json::json!({})
        } else {
            v.clone()
        }
    };
    // Both statements take the same parameters.
    let statement = if existing.is_some() {
        format!(
            "UPDATE jobs SET (description, kind, spec, worker_group, priority, concurrent,
                              requests_recovery, data, reject_retries, reject_interval_ms,
                              failed_retries, failed_interval_ms, backoff, timeout_ms,
                              data_time_period, execute_user, data_time_zone, retention_days,
                              expect_success_within_ms, source, updated_at)
                 = ($3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
                    $20, $21, coalesce($23, source), now()),
                 expect_success_since = CASE
                     WHEN expect_success_within_ms IS DISTINCT FROM $21 THEN now()
                     ELSE expect_success_since END
             WHERE group_name = $1 AND name = $2
               AND ($22::bigint = 0 OR xmin::text::bigint = $22)
             RETURNING {JOB_COLUMNS}"
        )
    } else {
        format!(
            "INSERT INTO jobs (group_name, name, description, kind, spec, worker_group, priority,
                               concurrent, requests_recovery, data, reject_retries,
                               reject_interval_ms, failed_retries, failed_interval_ms, backoff,
                               timeout_ms, data_time_period, execute_user, data_time_zone,
                               retention_days, expect_success_within_ms, source)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                     $18, $19, $20, $21, $22)
             RETURNING {JOB_COLUMNS}"
        )
    };
    let query = sqlx::query_as(sqlx::AssertSqlSafe(statement))
        .bind(&group)
        .bind(&job.name)
        .bind(job.description.clone().unwrap_or_default())
        .bind(&job.kind)
        .bind(Json(empty(&job.spec)))
        .bind(&worker_group)
        .bind(job.priority.unwrap_or(DEFAULT_PRIORITY))
        .bind(job.concurrent.unwrap_or(true))
        .bind(job.requests_recovery.unwrap_or(false))
        .bind(Json(empty(&job.data)))
        .bind(job.reject_retries.unwrap_or(0))
        .bind(job.reject_interval_ms.unwrap_or(DEFAULT_RETRY_INTERVAL_MS))
        .bind(job.failed_retries.unwrap_or(0))
        .bind(job.failed_interval_ms.unwrap_or(DEFAULT_RETRY_INTERVAL_MS))
        .bind(Json(backoff))
        .bind(job.timeout_ms)
        .bind(&job.data_time_period)
        .bind(&job.execute_user)
        .bind(job.data_time_zone.as_deref().unwrap_or("UTC"))
        .bind(job.retention_days)
        .bind(job.expect_success_within_ms);
    // Only an update has the version parameter, before the source.
    let query = match existing {
        Some(version) => query.bind(version).bind(source),
        None => query.bind(source),
    };
    let row: Result<Option<JobRow>, sqlx::Error> = query.fetch_optional(&mut *conn).await;
    match row {
        Ok(Some(row)) => Ok(row.into()),
        Ok(None) => Err(StoreError::NotFound(format!("job {group}.{}", job.name))),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Err(
            StoreError::Conflict(format!("job {group}.{} exists already", job.name)),
        ),
        // The group was deleted since it was resolved.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23503") => {
            Err(StoreError::UnknownGroup(worker_group))
        }
        Err(e) => Err(e).context("creating the job"),
    }
}

/// A job by group and name.
pub async fn get(store: &Store, group: &str, name: &str) -> Result<JobView, StoreError> {
    let row: Option<JobRow> = sqlx::query_as(select_jobs_with_schedule!(
        "WHERE group_name = $1 AND name = $2"
    ))
    .bind(group)
    .bind(name)
    .fetch_optional(store.pool())
    .await
    .context("reading the job")?;
    match row {
        Some(row) => Ok(row.into()),
        None => Err(super::not_found_in_group(store, "jobs", "job", group, name).await),
    }
}

/// Every job, by group and name.
pub async fn list(store: &Store) -> Result<Vec<JobView>, StoreError> {
    let rows: Vec<JobRow> = sqlx::query_as(select_jobs_with_schedule!(""))
        .fetch_all(store.pool())
        .await
        .context("listing jobs")?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Deletes a job and its triggers; its tasks stay as history. A job others depend on is refused
/// (naming them) unless `force`, which removes those dependencies too.
pub async fn delete(store: &Store, group: &str, name: &str, force: bool) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    remove(&mut tx, group, name, force).await?;
    tx.commit().await.context("committing the deletion")?;
    Ok(())
}

/// [`delete`] inside the caller's transaction.
pub async fn remove(
    tx: &mut sqlx::PgConnection,
    group: &str,
    name: &str,
    force: bool,
) -> Result<(), StoreError> {
    let dependents: Vec<String> = sqlx::query_scalar(
        "SELECT d.group_name || '.' || d.name
         FROM job_dependencies x JOIN jobs u ON u.id = x.depends_on_job_id
              JOIN jobs d ON d.id = x.job_id
         WHERE u.group_name = $1 AND u.name = $2 ORDER BY 1",
    )
    .bind(group)
    .bind(name)
    .fetch_all(&mut *tx)
    .await
    .context("finding the job's dependents")?;
    if !dependents.is_empty() {
        if !force {
            return Err(StoreError::Conflict(format!(
                "job {group}.{name} has jobs depending on it: {} (remove those dependencies, or \
                 delete with --force)",
                dependents.join(", ")
            )));
        }
        sqlx::query(
            "DELETE FROM job_dependencies x USING jobs u
             WHERE u.id = x.depends_on_job_id AND u.group_name = $1 AND u.name = $2",
        )
        .bind(group)
        .bind(name)
        .execute(&mut *tx)
        .await
        .context("removing the dependencies on the job")?;
    }
    let done = sqlx::query("DELETE FROM jobs WHERE group_name = $1 AND name = $2")
        .bind(group)
        .bind(name)
        .execute(&mut *tx)
        .await;
    match done {
        Ok(done) if done.rows_affected() == 0 => {
            Err(StoreError::NotFound(format!("job {group}.{name}")))
        }
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23503") => Err(
            StoreError::Conflict(format!("job {group}.{name} has jobs depending on it")),
        ),
        Err(e) => Err(e).context("deleting the job"),
    }
}

/// The jobs a `group.name` text can name. Groups and names may hold dots (Quartz's often do),
/// so every split is tried, and the whole text as a name in the default group: each that names
/// an existing job, as (group, name). One is the job; none or several, the caller says so.
pub async fn find_dotted(store: &Store, text: &str) -> Result<Vec<(String, String)>, StoreError> {
    let mut groups = vec!["default"];
    let mut names = vec![text];
    for (dot, _) in text.match_indices('.') {
        groups.push(&text[..dot]);
        names.push(&text[dot + 1..]);
    }
    sqlx::query_as(
        "SELECT j.group_name, j.name
         FROM UNNEST($1::text[], $2::text[]) AS c(group_name, name)
         JOIN jobs j ON j.group_name = c.group_name AND j.name = c.name",
    )
    .bind(&groups)
    .bind(&names)
    .fetch_all(store.pool())
    .await
    .context("looking up the job")
}
