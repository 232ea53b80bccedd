//! Reading tasks and their attempts, for the API and the CLI.

use sqlx::FromRow;
use sqlx::types::Json;
use uuid::Uuid;

use super::dependencies::{self, Verdict};
use super::{Context, Store, StoreError};
use crate::model::{
    AttemptOutcome, AttemptView, JobRef, TaskResult, TaskStatus, TaskSummary, TaskView,
    UnmetDependency,
};

/// The most tasks one list call returns.
pub const MAX_LIST_LIMIT: i64 = 1000;

#[derive(FromRow)]
pub(crate) struct TaskRow {
    id: Uuid,
    status: String,
    attempt: i32,
    job_id: Option<i64>,
    job_group: Option<String>,
    job_name: Option<String>,
    job_zone: Option<String>,
    kind: String,
    worker_group: String,
    spec: Json<serde_json::Value>,
    data: Json<serde_json::Value>,
    data_time: Option<jiff_sqlx::Timestamp>,
    priority: i32,
    timeout_ms: Option<i64>,
    reason: Option<String>,
    created_at: jiff_sqlx::Timestamp,
    started_at: Option<jiff_sqlx::Timestamp>,
    finished_at: Option<jiff_sqlx::Timestamp>,
    next_attempt_at: Option<jiff_sqlx::Timestamp>,
    result: Option<Json<TaskResult>>,
    backfill_id: Option<i64>,
    name: Option<String>,
}

/// `SELECT <task columns> FROM tasks t LEFT JOIN jobs j … <rest>`, as a static string.
macro_rules! select_tasks {
    ($rest:literal) => {
        concat!(
            "SELECT t.id, t.status, t.attempt, t.job_id, j.group_name AS job_group,
                    j.name AS job_name, j.data_time_zone AS job_zone, t.kind, t.worker_group,
                    t.spec, t.data, t.data_time,
                    t.priority, t.timeout_ms, t.reason, t.created_at, t.started_at,
                    t.finished_at, t.next_attempt_at, t.result, t.backfill_id, t.name
             FROM tasks t LEFT JOIN jobs j ON j.id = t.job_id ",
            $rest
        )
    };
}

/// A status column's value (its CHECK constraint holds the seven names).
pub(crate) fn decode_status(status: &str) -> Result<TaskStatus, StoreError> {
    status
        .parse::<TaskStatus>()
        .map_err(|e| StoreError::Database {
            context: "reading a task's status",
            source: sqlx::Error::Decode(Box::new(e)),
        })
}

/// The job a task row's joined columns name, if it has one.
fn job_ref(
    id: Option<i64>,
    group: Option<String>,
    name: Option<String>,
    zone: Option<String>,
) -> Option<JobRef> {
    match (id, group, name) {
        (Some(id), Some(group), Some(name)) => Some(JobRef {
            id,
            group,
            name,
            data_time_zone: zone.unwrap_or_else(|| "UTC".into()),
        }),
        _ => None,
    }
}

impl TaskRow {
    pub(crate) fn into_view(self, attempts: Vec<AttemptView>) -> Result<TaskView, StoreError> {
        let status = decode_status(&self.status)?;
        let job = job_ref(self.job_id, self.job_group, self.job_name, self.job_zone);
        Ok(TaskView {
            id: self.id,
            status,
            attempt: self.attempt,
            job,
            name: self.name,
            kind: self.kind,
            group: self.worker_group,
            spec: self.spec.0,
            data: self.data.0,
            data_time: self.data_time.map(|t| t.to_jiff()),
            priority: self.priority,
            timeout_ms: self.timeout_ms,
            reason: self.reason,
            created_at: self.created_at.to_jiff(),
            started_at: self.started_at.map(|t| t.to_jiff()),
            finished_at: self.finished_at.map(|t| t.to_jiff()),
            next_attempt_at: self.next_attempt_at.map(|t| t.to_jiff()),
            result: self.result.map(|r| r.0),
            attempts,
            waiting_on: Vec::new(),
            stalled: Vec::new(),
            backfill_id: self.backfill_id,
        })
    }
}

#[derive(FromRow)]
struct AttemptRow {
    attempt: i32,
    outcome: Option<String>,
    worker_name: Option<String>,
    started_at: jiff_sqlx::Timestamp,
    finished_at: Option<jiff_sqlx::Timestamp>,
    exit_code: Option<i32>,
    error: Option<String>,
    output: Option<String>,
    value: Option<Json<serde_json::Value>>,
}

impl AttemptRow {
    fn into_view(self) -> AttemptView {
        let outcome = self.outcome.and_then(|o| {
            serde_json::from_value::<AttemptOutcome>(serde_json::Value::String(o)).ok()
        });
        AttemptView {
            attempt: self.attempt,
            outcome,
            worker: self.worker_name,
            started_at: self.started_at.to_jiff(),
            finished_at: self.finished_at.map(|t| t.to_jiff()),
            exit_code: self.exit_code,
            error: self.error,
            output: self.output,
            value: self.value.map(|v| v.0),
        }
    }
}

/// One task with all its attempts.
pub async fn get(store: &Store, id: Uuid) -> Result<TaskView, StoreError> {
    let row: Option<TaskRow> = sqlx::query_as(select_tasks!("WHERE t.id = $1"))
        .bind(id)
        .fetch_optional(store.pool())
        .await
        .context("reading the task")?;
    let row = row.ok_or(StoreError::TaskNotFound(id))?;
    // A running attempt has no row of its own until it prints or ends: the task's row is it.
    let attempts: Vec<AttemptRow> = sqlx::query_as(
        "SELECT attempt, outcome, worker_name, started_at, finished_at, exit_code, error, output,
                value
         FROM task_attempts WHERE task_id = $1
         UNION ALL
         SELECT t.attempt, NULL, w.name, t.started_at, NULL, NULL, NULL, NULL, NULL
         FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id
         WHERE t.id = $1 AND t.status = 'running' AND t.started_at IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM task_attempts a
                           WHERE a.task_id = t.id AND a.attempt = t.attempt)
         ORDER BY attempt",
    )
    .bind(id)
    .fetch_all(store.pool())
    .await
    .context("reading the task's attempts")?;
    let mut view = row.into_view(attempts.into_iter().map(AttemptRow::into_view).collect())?;
    if view.status == TaskStatus::Waiting {
        view.waiting_on = waiting_on(store, &view).await?;
    }
    view.stalled = stalled(store, &view).await?;
    Ok(view)
}

/// Why a task that has not ended is not running: a `ready` task with no worker online in its
/// group, or with every slot of its group's workers busy and tasks queued ahead of it; a
/// `retrying` task's next attempt; a `waiting` one with no dependency service alive to advance
/// it (what it waits for is [`waiting_on`]).
async fn stalled(store: &Store, task: &TaskView) -> Result<Vec<String>, StoreError> {
    let mut why = Vec::new();
    match task.status {
        TaskStatus::Ready | TaskStatus::Retrying => {
            let queue = queue_position(store, task).await?;
            if queue.workers == 0 {
                why.push(format!(
                    "no worker is online in group {g}: start `chime worker --groups {g}`",
                    g = task.group
                ));
            } else if task.status == TaskStatus::Ready && queue.free_slots == 0 {
                why.push(format!(
                    "all {slots} {which} slots of group {g}'s {workers} online worker(s) are \
                     busy; {ahead} task(s) are queued ahead of it",
                    slots = queue.slots,
                    which = if crate::model::kinds::runs_inline(&task.kind) {
                        "inline"
                    } else {
                        "process"
                    },
                    g = task.group,
                    workers = queue.workers,
                    ahead = queue.ahead,
                ));
            }
            if let (TaskStatus::Retrying, Some(at)) = (task.status, task.next_attempt_at) {
                why.push(format!(
                    "attempt {} ended; attempt {} is due at {at}",
                    task.attempt,
                    task.attempt + 1
                ));
            }
        }
        TaskStatus::Waiting => {
            let alive = super::services::alive_by_kind(store).await?;
            if alive.get("dependency").copied().unwrap_or(0) == 0 {
                why.push(
                    "no dependency service is running: nothing advances it when its upstreams \
                     end (start `chime dependency`)"
                        .into(),
                );
            }
        }
        _ => {}
    }
    Ok(why)
}

/// Where a ready task stands in its group: the online workers and their slots of the task's
/// kind (inline or process), and the ready tasks of that kind the queue hands out before it
/// (higher priority, or the same and made ready earlier).
#[derive(FromRow)]
struct QueuePosition {
    workers: i64,
    slots: i64,
    free_slots: i64,
    ahead: i64,
}

async fn queue_position(store: &Store, task: &TaskView) -> Result<QueuePosition, StoreError> {
    sqlx::query_as(
        "WITH online AS (
             SELECT id, CASE WHEN $3 THEN inline_concurrency ELSE concurrency END AS slots
             FROM workers WHERE status = 'online' AND $1 = ANY (groups)
               -- A worker of an earlier version (no inline slots) never takes an inline task.
               AND (NOT $3 OR inline_concurrency > 0)
         ), me AS (
             SELECT priority, coalesce(ready_at, created_at) AS at FROM tasks WHERE id = $2
         )
         SELECT (SELECT count(*) FROM online) AS workers,
                (SELECT coalesce(sum(slots), 0) FROM online)::bigint AS slots,
                greatest(0, (SELECT coalesce(sum(slots), 0) FROM online)
                            - (SELECT count(*) FROM tasks
                               WHERE status = 'running' AND worker_id IN (SELECT id FROM online)
                                 AND (kind = ANY ($4)) = $3)
                )::bigint AS free_slots,
                (SELECT count(*) FROM tasks t, me
                 WHERE t.status = 'ready' AND t.worker_group = $1 AND t.id <> $2
                   AND (t.kind = ANY ($4)) = $3
                   AND (t.priority > me.priority
                        OR (t.priority = me.priority
                            AND coalesce(t.ready_at, t.created_at) < me.at))) AS ahead",
    )
    .bind(&task.group)
    .bind(task.id)
    .bind(crate::model::kinds::runs_inline(&task.kind))
    .bind(&crate::model::kinds::INLINE_KINDS[..])
    .fetch_one(store.pool())
    .await
    .context("reading the task's place in its queue")
}

/// What a waiting task waits for: its turn in a backfill, or its upstream runs.
async fn waiting_on(store: &Store, task: &TaskView) -> Result<Vec<UnmetDependency>, StoreError> {
    if let (Some(backfill), Some(job)) = (task.backfill_id, &task.job) {
        let own: bool = sqlx::query_scalar("SELECT job_id = $2 FROM backfills WHERE id = $1")
            .bind(backfill)
            .bind(job.id)
            .fetch_optional(store.pool())
            .await
            .context("reading the task's backfill")?
            .unwrap_or(false);
        if own {
            return Ok(vec![UnmetDependency {
                upstream: format!("backfill {backfill}"),
                data_time: None,
                state: "waiting for its turn (the backfill's parallelism)".into(),
                task: None,
            }]);
        }
    }
    let (Some(job), Some(data_time)) = (&task.job, task.data_time) else {
        return Ok(Vec::new());
    };
    let mut unmet = match dependencies::evaluate(store, job.id, data_time).await? {
        Verdict::Waiting(unmet) => unmet,
        Verdict::Ready => Vec::new(),
        Verdict::Failed { upstream } => vec![UnmetDependency {
            upstream,
            data_time: Some(data_time),
            state: "failed: this task is about to fail with it".into(),
            task: None,
        }],
    };
    explain_missing(store, job.id, &mut unmet).await?;
    Ok(unmet)
}

/// Says why a missing upstream run is not coming when its job's triggers will not make it: the
/// job paused, or every trigger of it paused (by itself or by its group).
async fn explain_missing(
    store: &Store,
    job_id: i64,
    unmet: &mut [UnmetDependency],
) -> Result<(), StoreError> {
    for dependency in unmet.iter_mut().filter(|u| u.state == "missing") {
        let held: Option<(String, String, bool, i64, i64, Option<String>)> = sqlx::query_as(
            "SELECT j.group_name, j.name, j.paused,
                    count(t.job_id),
                    count(t.job_id) FILTER (WHERE t.state IN ('paused', 'paused_blocked')),
                    min(t.group_name || '.' || t.name)
                        FILTER (WHERE t.state IN ('paused', 'paused_blocked'))
             FROM jobs j LEFT JOIN triggers t ON t.job_id = j.id
             WHERE j.id IN (SELECT depends_on_job_id FROM job_dependencies WHERE job_id = $2)
               AND j.group_name || '.' || j.name = $1
             GROUP BY j.id",
        )
        .bind(&dependency.upstream)
        .bind(job_id)
        .fetch_optional(store.pool())
        .await
        .context("reading whether the upstream is paused")?;
        let Some((group, name, job_paused, triggers, paused, first)) = held else {
            continue;
        };
        if job_paused {
            dependency.state = format!(
                "missing: held by its paused job (`chime job resume {name} --group {group}`)"
            );
        } else if let Some(first) = first.filter(|_| triggers > 0 && paused == triggers) {
            dependency.state = if triggers == 1 {
                format!("missing: held by its paused trigger {first}")
            } else {
                format!("missing: held by its {triggers} paused triggers ({first}, …)")
            };
        }
    }
    Ok(())
}

#[derive(FromRow)]
struct SummaryRow {
    id: Uuid,
    status: String,
    attempt: i32,
    job_id: Option<i64>,
    job_group: Option<String>,
    job_name: Option<String>,
    job_zone: Option<String>,
    kind: String,
    worker_group: String,
    data_time: Option<jiff_sqlx::Timestamp>,
    priority: i32,
    submit_user: Option<String>,
    name: Option<String>,
    command: Option<String>,
    reason: Option<String>,
    exit_code: Option<i32>,
    created_at: jiff_sqlx::Timestamp,
    started_at: Option<jiff_sqlx::Timestamp>,
    finished_at: Option<jiff_sqlx::Timestamp>,
}

/// `SELECT <summary columns> …`: never the spec, data or result, which may be a megabyte each.
macro_rules! select_summaries {
    ($rest:literal) => {
        concat!(
            "SELECT t.id, t.status, t.attempt, t.job_id, j.group_name AS job_group,
                    j.name AS job_name, j.data_time_zone AS job_zone, t.kind, t.worker_group,
                    t.data_time, t.priority,
                    t.submit_user, t.name,
                    CASE WHEN t.job_id IS NULL AND t.kind = 'shell' THEN left(
                        CASE jsonb_typeof(t.spec->'command')
                            WHEN 'string' THEN t.spec->>'command'
                            WHEN 'array' THEN (SELECT string_agg(c, ' ')
                                               FROM jsonb_array_elements_text(t.spec->'command') c)
                        END, 80) END AS command,
                    t.reason, (t.result->>'exit_code')::int AS exit_code,
                    t.created_at, t.started_at, t.finished_at
             FROM tasks t LEFT JOIN jobs j ON j.id = t.job_id ",
            $rest
        )
    };
}

impl SummaryRow {
    fn into_summary(self) -> Result<TaskSummary, StoreError> {
        let status = decode_status(&self.status)?;
        let job = job_ref(self.job_id, self.job_group, self.job_name, self.job_zone);
        Ok(TaskSummary {
            id: self.id,
            status,
            attempt: self.attempt,
            job,
            kind: self.kind,
            group: self.worker_group,
            data_time: self.data_time.map(|t| t.to_jiff()),
            priority: self.priority,
            submit_user: self.submit_user,
            name: self.name,
            command: self.command,
            reason: self.reason,
            exit_code: self.exit_code,
            created_at: self.created_at.to_jiff(),
            started_at: self.started_at.map(|t| t.to_jiff()),
            finished_at: self.finished_at.map(|t| t.to_jiff()),
        })
    }
}

/// Which tasks a list shows; every field narrows it. Lists are newest first.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only tasks in this status.
    pub status: Option<TaskStatus>,
    /// Only tasks of this job (`group`, `name`).
    pub job: Option<(String, String)>,
    /// Only tasks for this worker group.
    pub worker_group: Option<String>,
    /// Only tasks of this kind.
    pub kind: Option<String>,
    /// Only tasks created at or after this time.
    pub since: Option<jiff::Timestamp>,
    /// Only tasks whose data time is at or after this time.
    pub data_time_from: Option<jiff::Timestamp>,
    /// Only tasks whose data time is before this time.
    pub data_time_to: Option<jiff::Timestamp>,
    /// The next page: only tasks older than this one (the last id of the previous page).
    pub before: Option<Uuid>,
    /// Only tasks whose id starts with, or whose job name, name, command, kind, reason or
    /// submitter contains, this text (case-insensitive).
    pub text: Option<String>,
    /// Only tasks whose id starts with this (see [`IdPrefix`]).
    pub id_prefix: Option<IdPrefix>,
    /// Only tasks of this backfill.
    pub backfill: Option<i64>,
    /// Only tasks whose current attempt is this worker's (what it runs, or last ran for them).
    pub worker: Option<Uuid>,
}

/// The start of an id, as a person types it (`01a21341-82f3`, hyphens optional, at least 8 hex
/// digits): the range of ids that begin with it, which the primary key finds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdPrefix {
    /// The smallest id with the prefix.
    pub first: Uuid,
    /// The largest.
    pub last: Uuid,
}

impl std::str::FromStr for IdPrefix {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let digits: String = text.chars().filter(|c| *c != '-').collect();
        if digits.len() < 8 || digits.len() > 32 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "{text:?} is not the start of an id: give at least 8 of its hex digits"
            ));
        }
        let padded = |fill: char| {
            let mut full = digits.to_ascii_lowercase();
            full.extend(std::iter::repeat_n(fill, 32 - digits.len()));
            Uuid::parse_str(&full).map_err(|e| format!("{text:?}: {e}"))
        };
        Ok(Self {
            first: padded('0')?,
            last: padded('f')?,
        })
    }
}

/// The newest tasks that pass `filter`, at most `limit`, as summaries, newest by creation first
/// (not by id: a caller may choose the id, and it sorts anywhere). The walk is on the creation
/// index, so a page costs its length, not the store's size.
pub async fn list(
    store: &Store,
    filter: &TaskFilter,
    limit: i64,
) -> Result<Vec<TaskSummary>, StoreError> {
    let limit = limit.clamp(1, MAX_LIST_LIMIT);
    let mut query = sqlx::QueryBuilder::<sqlx::Postgres>::new(select_summaries!("WHERE true"));
    if let Some(status) = filter.status {
        // Written into the statement (one of seven fixed words) so the planner can match the
        // partial indexes on status, which a parameter would hide.
        query.push(format_args!(" AND t.status = '{}'", status.as_str()));
    }
    if let Some((group, name)) = &filter.job {
        // By the job's id, so the planner can use the tasks-by-job index.
        query
            .push(" AND t.job_id = (SELECT id FROM jobs WHERE group_name = ")
            .push_bind(group.clone())
            .push(" AND name = ")
            .push_bind(name.clone())
            .push(")");
    }
    if let Some(group) = &filter.worker_group {
        query
            .push(" AND t.worker_group = ")
            .push_bind(group.clone());
    }
    if let Some(kind) = &filter.kind {
        query.push(" AND t.kind = ").push_bind(kind.clone());
    }
    if let Some(since) = filter.since {
        query
            .push(" AND t.created_at >= ")
            .push_bind(jiff_sqlx::Timestamp::from(since));
    }
    if let Some(from) = filter.data_time_from {
        query
            .push(" AND t.data_time >= ")
            .push_bind(jiff_sqlx::Timestamp::from(from));
    }
    if let Some(to) = filter.data_time_to {
        query
            .push(" AND t.data_time < ")
            .push_bind(jiff_sqlx::Timestamp::from(to));
    }
    if let Some(before) = filter.before {
        // After the given task in creation order; a task that is gone (pruned) ends the list.
        query
            .push(
                " AND (t.created_at, t.id) < (SELECT b.created_at, b.id FROM tasks b WHERE b.id = ",
            )
            .push_bind(before)
            .push(")");
    }
    if let Some(backfill) = filter.backfill {
        query.push(" AND t.backfill_id = ").push_bind(backfill);
    }
    if let Some(worker) = filter.worker {
        query.push(" AND t.worker_id = ").push_bind(worker);
    }
    if let Some(prefix) = filter.id_prefix {
        query
            .push(" AND t.id BETWEEN ")
            .push_bind(prefix.first)
            .push(" AND ")
            .push_bind(prefix.last);
    }
    if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
        let escaped = text
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let pattern = format!("%{escaped}%");
        query
            .push(" AND (t.id::text LIKE ")
            .push_bind(format!("{}%", escaped.to_lowercase()))
            .push(" OR j.name ILIKE ")
            .push_bind(pattern.clone())
            .push(" OR t.kind ILIKE ")
            .push_bind(pattern.clone())
            .push(" OR t.reason ILIKE ")
            .push_bind(pattern.clone())
            .push(" OR t.submit_user ILIKE ")
            .push_bind(pattern.clone())
            .push(" OR t.name ILIKE ")
            .push_bind(pattern.clone())
            // A shell task's command: its script, or its argv as JSON text.
            .push(" OR t.spec->>'command' ILIKE ")
            .push_bind(pattern)
            .push(")");
    }
    query
        .push(" ORDER BY t.created_at DESC, t.id DESC LIMIT ")
        .push_bind(limit);
    let rows: Vec<SummaryRow> = query
        .build_query_as()
        .fetch_all(store.pool())
        .await
        .context("listing tasks")?;
    rows.into_iter().map(SummaryRow::into_summary).collect()
}

/// How many tasks are in each status (for the dashboard and benchmarks).
pub async fn count_by_status(store: &Store) -> Result<Vec<(TaskStatus, i64)>, StoreError> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status")
            .fetch_all(store.pool())
            .await
            .context("counting tasks")?;
    Ok(rows
        .into_iter()
        .filter_map(|(status, n)| status.parse().ok().map(|s| (s, n)))
        .collect())
}

/// A task's status and current attempt, if the task exists (why a message was not started).
pub async fn status_and_attempt(
    store: &Store,
    id: Uuid,
) -> Result<Option<(TaskStatus, i32)>, StoreError> {
    let row: Option<(String, i32)> =
        sqlx::query_as("SELECT status, attempt FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_optional(store.pool())
            .await
            .context("reading the task's status")?;
    Ok(row.and_then(|(status, attempt)| Some((status.parse().ok()?, attempt))))
}

/// The summaries of these tasks (for live updates), in no particular order.
pub async fn summaries(store: &Store, ids: &[Uuid]) -> Result<Vec<TaskSummary>, StoreError> {
    let rows: Vec<SummaryRow> = sqlx::query_as(select_summaries!("WHERE t.id = ANY($1)"))
        .bind(ids)
        .fetch_all(store.pool())
        .await
        .context("reading task summaries")?;
    rows.into_iter().map(SummaryRow::into_summary).collect()
}

/// Every task not yet ended, with its status: the set whose changes a live view follows. Read
/// from the index of live statuses alone (no table row is visited for a settled table).
pub async fn live_statuses(store: &Store) -> Result<Vec<(Uuid, String)>, StoreError> {
    sqlx::query_as(
        "SELECT id, status FROM tasks
         WHERE status IN ('waiting', 'ready', 'running', 'retrying')",
    )
    .fetch_all(store.pool())
    .await
    .context("reading live tasks")
}

/// The highest id a task created by now can have: UUIDv7 ids are time-ordered, and ids a client
/// chose (any other version, which may sort anywhere) above it are not taken for new tasks.
fn id_ceiling() -> Uuid {
    let ahead = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(3600))
        .unwrap_or(jiff::Timestamp::MAX);
    let ms = u64::try_from(ahead.as_millisecond()).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(ms, &[0; 10]).into_uuid()
}

/// Tasks created after `after` (by id, the creation order), oldest first, at most `limit`; all
/// tasks when `after` is None. A task whose client-chosen id is not a recent UUIDv7 is not
/// among them (a live view still sees it once it moves).
pub async fn created_after(
    store: &Store,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<(Uuid, String)>, StoreError> {
    sqlx::query_as(
        "SELECT id, status FROM tasks WHERE ($1::uuid IS NULL OR id > $1) AND id < $3
         ORDER BY id LIMIT $2",
    )
    .bind(after)
    .bind(limit)
    .bind(id_ceiling())
    .fetch_all(store.pool())
    .await
    .context("reading new tasks")
}

/// The newest task's id.
pub async fn newest_id(store: &Store) -> Result<Option<Uuid>, StoreError> {
    sqlx::query_scalar("SELECT id FROM tasks WHERE id < $1 ORDER BY id DESC LIMIT 1")
        .bind(id_ceiling())
        .fetch_optional(store.pool())
        .await
        .context("reading the newest task id")
}

/// The OS user a task runs as (`None`: the worker's default user).
pub async fn execute_user(store: &Store, id: Uuid) -> Result<Option<String>, StoreError> {
    let row: Option<Option<String>> =
        sqlx::query_scalar("SELECT execute_user FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_optional(store.pool())
            .await
            .context("reading a task's execute user")?;
    row.ok_or(StoreError::TaskNotFound(id))
}
