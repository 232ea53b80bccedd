//! The one place a task's status moves.
//!
//! ```text
//!   trigger fire (job with upstreams) ─┐   trigger fire / submit / job run / rerun
//!                                      ▼              │
//!   backfill ──────────────────────▶ waiting ──(upstreams met, backfill turn)──▶ ready
//!                                      │                                          │
//!                  upstream failed ◀───┘     worker takes attempt n ──▶ running ◀─┘
//!                  (failed, upstream_failed)                            │  ├──▶ succeeded
//!                                                                       │  ├──▶ failed (no budget left)
//!                         ready ◀── retrying ◀── rejected or failed ────┘  └──▶ killed
//!                                   (budget left; next_attempt_at)
//!   kill: waiting | ready | retrying → killed here; running → its worker kills it → killed
//!   worker gone, or its shutdown cut the attempt short:
//!                running → ready (requests_recovery) | retrying | failed (lost) | killed
//!   a start the worker never heard of: running → ready (next attempt)
//!   ready, message lost on the bus: the same attempt's message published again
//! ```
//!
//! Every transition is one statement or one transaction, fenced by `(task, attempt)` where a
//! worker is involved: a worker that holds a stale attempt, or a duplicate delivery, moves
//! nothing. Every transition that others must hear about writes its bus message (task message,
//! event, kill command) to the outbox in the same transaction, so a message exists iff the change
//! committed.

use serde_json::json;
use sqlx::types::Json;
use uuid::Uuid;

use super::{Context, Store, StoreError, kind_routes};
use crate::bus::Topology;
use crate::model::{AttemptOutcome, MESSAGE_VERSION, NewTask, TaskMessage, TaskResult, TaskStatus};

/// The result of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// The task's id.
    pub id: Uuid,
    /// False when a task with the client-chosen id already existed (nothing was written).
    pub created: bool,
}

/// The worker that runs an attempt.
#[derive(Debug, Clone)]
pub struct WorkerIdentity {
    /// Its row in `workers`.
    pub id: Uuid,
    /// Its human name.
    pub name: String,
}

/// How an attempt ended, as the worker saw it.
#[derive(Debug, Clone)]
pub enum AttemptEnd {
    /// It ran and succeeded.
    Succeeded(TaskResult),
    /// It ran and failed; the failed budget decides between `retrying` and `failed`.
    Failed {
        /// What it produced.
        result: TaskResult,
        /// Why, in one word (failed, timeout, error, interrupted).
        reason: &'static str,
    },
    /// The worker could not take it (draining, no executor, execute_user not allowed) or the job
    /// asked to be tried later (exit 75, http 429/503); the reject budget decides.
    Rejected {
        /// What it produced (a command's output and exit code, an HTTP answer's body), and why
        /// in `error`.
        result: TaskResult,
        /// The earliest the next attempt may run, when the job said so (http Retry-After); the
        /// task's reject interval applies if it is longer.
        retry_after: Option<std::time::Duration>,
    },
    /// It was killed on request (`chime task kill`).
    Killed(TaskResult),
    /// The worker's shutdown cut it short: not the job's failure. Recorded by
    /// [`release_attempts`] as a lost attempt ([`Release::Interrupted`]), never by
    /// [`finish_attempts`].
    Abandoned(TaskResult),
}

impl AttemptEnd {
    /// The attempt's outcome.
    pub fn outcome(&self) -> AttemptOutcome {
        match self {
            Self::Succeeded(_) => AttemptOutcome::Succeeded,
            Self::Failed { .. } => AttemptOutcome::Failed,
            Self::Rejected { .. } => AttemptOutcome::Rejected,
            Self::Killed(_) => AttemptOutcome::Killed,
            Self::Abandoned(_) => AttemptOutcome::Lost,
        }
    }
}

/// An attempt's end, as its worker reports it.
#[derive(Debug, Clone)]
pub struct FinishedAttempt {
    /// The task.
    pub task_id: Uuid,
    /// The attempt that ended.
    pub attempt: i32,
    /// How it ended.
    pub end: AttemptEnd,
}

/// Creates a `ready` ad-hoc task and its task message, in one statement.
///
/// The group is resolved by [`kind_routes::resolve_group`]; an unknown kind is refused. With a
/// client-chosen id that exists already, nothing is written.
pub async fn submit(
    store: &Store,
    topology: &Topology,
    task: NewTask,
) -> Result<Submitted, StoreError> {
    let mut submitted = submit_many(store, topology, vec![task]).await?;
    submitted.pop().ok_or_else(|| StoreError::Database {
        context: "submitting the task",
        source: sqlx::Error::RowNotFound,
    })
}

/// `(nothing) → ready` for a batch of ad-hoc tasks: every task and its task message in one
/// statement (one commit). Returns one [`Submitted`] per task, in order. An unknown kind refuses
/// the whole batch; tasks whose client-chosen id exists already are skipped.
pub async fn submit_many(
    store: &Store,
    topology: &Topology,
    tasks: Vec<NewTask>,
) -> Result<Vec<Submitted>, StoreError> {
    let mut groups_by_kind: std::collections::HashMap<(String, Option<String>), String> =
        std::collections::HashMap::new();
    let mut messages = Vec::with_capacity(tasks.len());
    let mut settings = Vec::with_capacity(tasks.len());
    for task in tasks {
        let key = (task.kind.clone(), task.group.clone());
        let group = match groups_by_kind.get(&key) {
            Some(group) => group.clone(),
            None => {
                let group =
                    kind_routes::resolve_group(store, &task.kind, task.group.as_deref()).await?;
                groups_by_kind.insert(key, group.clone());
                group
            }
        };
        let or_empty = |v: serde_json::Value| if v.is_null() { json!({}) } else { v };
        messages.push(TaskMessage {
            v: MESSAGE_VERSION,
            task_id: task.id.unwrap_or_else(Uuid::now_v7),
            attempt: 1,
            kind: task.kind,
            group,
            spec: or_empty(task.spec),
            data: or_empty(task.data),
            data_time: task.data_time,
            timeout_ms: task.timeout_ms,
            execute_user: task.execute_user,
        });
        let backoff = serde_json::to_value(task.backoff.unwrap_or_default())
            .unwrap_or_else(|_| json!({"kind": "fixed"}));
        settings.push((
            task.priority.unwrap_or(5),
            task.reject_retries.unwrap_or(0),
            task.reject_interval_ms.unwrap_or(3000),
            task.failed_retries.unwrap_or(0),
            task.failed_interval_ms.unwrap_or(3000),
            backoff,
            task.requests_recovery.unwrap_or(false),
            task.submit_user,
        ));
    }
    let ids: Vec<Uuid> = messages.iter().map(|m| m.task_id).collect();
    let kinds: Vec<&str> = messages.iter().map(|m| m.kind.as_str()).collect();
    let specs: Vec<Json<&serde_json::Value>> = messages.iter().map(|m| Json(&m.spec)).collect();
    let groups: Vec<&str> = messages.iter().map(|m| m.group.as_str()).collect();
    let data: Vec<Json<&serde_json::Value>> = messages.iter().map(|m| Json(&m.data)).collect();
    let data_times: Vec<Option<jiff_sqlx::Timestamp>> = messages
        .iter()
        .map(|m| m.data_time.map(jiff_sqlx::Timestamp::from))
        .collect();
    let timeouts: Vec<Option<i64>> = messages.iter().map(|m| m.timeout_ms).collect();
    let users: Vec<Option<&str>> = messages.iter().map(|m| m.execute_user.as_deref()).collect();
    let bodies: Vec<Json<&TaskMessage>> = messages.iter().map(Json).collect();
    let priorities: Vec<i32> = settings.iter().map(|s| s.0).collect();
    let reject_retries: Vec<i32> = settings.iter().map(|s| s.1).collect();
    let reject_intervals: Vec<i64> = settings.iter().map(|s| s.2).collect();
    let failed_retries: Vec<i32> = settings.iter().map(|s| s.3).collect();
    let failed_intervals: Vec<i64> = settings.iter().map(|s| s.4).collect();
    let backoffs: Vec<Json<&serde_json::Value>> = settings.iter().map(|s| Json(&s.5)).collect();
    let recovery: Vec<bool> = settings.iter().map(|s| s.6).collect();
    let submitters: Vec<Option<&str>> = settings.iter().map(|s| s.7.as_deref()).collect();
    let inserted: Vec<Uuid> = sqlx::query_scalar(
        r#"
        WITH new AS (
            -- a client-chosen id given twice in one batch makes one task and one message
            SELECT DISTINCT ON (id) * FROM UNNEST($1::uuid[], $2::text[], $3::jsonb[], $4::text[], $5::int[],
                                 $6::int[], $7::bigint[], $8::int[], $9::bigint[], $10::jsonb[],
                                 $11::bigint[], $12::bool[], $13::timestamptz[], $14::jsonb[],
                                 $15::text[], $16::text[], $17::jsonb[])
                AS n(id, kind, spec, worker_group, priority, reject_retries, reject_interval_ms,
                     failed_retries, failed_interval_ms, backoff, timeout_ms, requests_recovery,
                     data_time, data, submit_user, execute_user, body)
        ), task AS (
            INSERT INTO tasks (id, kind, spec, worker_group, priority, status, attempt,
                               reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user, ready_at)
            SELECT id, kind, spec, worker_group, priority, 'ready', 1, reject_retries,
                   reject_interval_ms, failed_retries, failed_interval_ms, backoff, timeout_ms,
                   requests_recovery, data_time, data, submit_user, execute_user, now()
            FROM new
            ON CONFLICT (id) DO NOTHING
            RETURNING id
        ), message AS (
            -- every task message of the batch in one (batched) outbox row
            INSERT INTO outbox (exchange, routing_key, body, batched)
            SELECT $18, '', jsonb_agg(jsonb_build_object('k', new.worker_group, 'b', new.body)),
                   true
            FROM new JOIN task USING (id)
            HAVING count(*) > 0
        )
        SELECT id FROM task
        "#,
    )
    .bind(&ids)
    .bind(&kinds)
    .bind(&specs)
    .bind(&groups)
    .bind(&priorities)
    .bind(&reject_retries)
    .bind(&reject_intervals)
    .bind(&failed_retries)
    .bind(&failed_intervals)
    .bind(&backoffs)
    .bind(&timeouts)
    .bind(&recovery)
    .bind(&data_times)
    .bind(&data)
    .bind(&submitters)
    .bind(&users)
    .bind(&bodies)
    .bind(topology.tasks_exchange())
    .fetch_all(store.pool())
    .await
    .context("inserting the tasks")?;
    let inserted: std::collections::HashSet<Uuid> = inserted.into_iter().collect();
    Ok(ids
        .into_iter()
        .map(|id| Submitted {
            id,
            created: inserted.contains(&id),
        })
        .collect())
}

/// The longest Retry-After honoured: a day.
const MAX_RETRY_AFTER_MS: i64 = 24 * 60 * 60 * 1000;

/// A result PostgreSQL's jsonb can hold: a NUL in a task's output or error (which a process may
/// print) becomes U+FFFD instead of failing the statement.
fn storable(mut result: TaskResult) -> TaskResult {
    if result.output.contains('\0') {
        result.output = result.output.replace('\0', "\u{FFFD}");
    }
    if let Some(error) = result.error.as_mut().filter(|e| e.contains('\0')) {
        *error = error.replace('\0', "\u{FFFD}");
    }
    result
}

/// `ready → running` for exactly these attempts, recording the worker and opening each attempt's
/// row, in one statement. Each attempt is asked for by its message, as delivered: it starts only
/// if its task's row records the same attempt with the same group, kind, spec, data, data time,
/// timeout and execute user, so a forged or stale message that differs in any of them starts
/// nothing and leaves the attempt as it was (the caller dead-letters it). Returns, for each
/// `(task, attempt)` that is now this worker's, the attempt as the task's row records it: what
/// the worker runs. An attempt is this worker's if it moved, or if it was already running under
/// this worker (a start that committed while the worker saw an error, asked again: the answer
/// must not depend on whether the first commit was heard). The others were duplicate or stale
/// deliveries, killed tasks or messages that differ from their row, which the caller tells
/// apart ([`recorded_attempt`]); the worker itself keeps one delivery per attempt.
pub async fn start_attempts(
    store: &Store,
    worker: &WorkerIdentity,
    messages: &[TaskMessage],
) -> Result<Vec<TaskMessage>, StoreError> {
    let n = messages.len();
    let mut ids = Vec::with_capacity(n);
    let mut numbers = Vec::with_capacity(n);
    let mut groups = Vec::with_capacity(n);
    let mut kinds = Vec::with_capacity(n);
    let mut specs = Vec::with_capacity(n);
    let mut datas = Vec::with_capacity(n);
    let mut data_times = Vec::with_capacity(n);
    let mut timeouts = Vec::with_capacity(n);
    let mut users = Vec::with_capacity(n);
    for m in messages {
        ids.push(m.task_id);
        numbers.push(m.attempt);
        groups.push(m.group.as_str());
        kinds.push(m.kind.as_str());
        specs.push(Json(&m.spec));
        datas.push(Json(&m.data));
        // Microseconds since the epoch: PostgreSQL's precision, compared exactly.
        data_times.push(m.data_time.map(|t| t.as_microsecond()));
        timeouts.push(m.timeout_ms);
        users.push(m.execute_user.as_deref());
    }
    let started: Vec<MessageParts> = sqlx::query_as(
        r#"
        WITH wanted AS (
            SELECT * FROM UNNEST($1::uuid[], $2::int[], $5::text[], $6::text[], $7::jsonb[],
                                 $8::jsonb[], $9::bigint[], $10::bigint[], $11::text[])
                AS w(id, attempt, worker_group, kind, spec, data, data_time_us, timeout_ms,
                     execute_user)
        ), moved AS (
            UPDATE tasks t SET status = 'running', worker_id = $3, started_at = now()
            FROM wanted w
            WHERE t.id = w.id AND t.attempt = w.attempt AND t.status = 'ready'
              AND t.worker_group = w.worker_group AND t.kind = w.kind AND t.spec = w.spec
              AND t.data = w.data AND t.timeout_ms IS NOT DISTINCT FROM w.timeout_ms
              AND t.execute_user IS NOT DISTINCT FROM w.execute_user
              AND t.data_time IS NOT DISTINCT FROM
                  timestamptz 'epoch' + w.data_time_us * interval '1 microsecond'
              -- a worker declared dead, or whose lease ran out, starts nothing until its
              -- heartbeat renews the lease
              AND EXISTS (SELECT 1 FROM workers k
                          WHERE k.id = $3 AND k.status IN ('online', 'draining')
                            AND coalesce(k.lease_expires_at, 'infinity') > now())
            RETURNING t.id, t.attempt, t.started_at, t.kind, t.spec, t.worker_group, t.data,
                      t.data_time, t.timeout_ms, t.execute_user
        ), opened AS (
            INSERT INTO task_attempts (task_id, attempt, worker_id, worker_name, started_at)
            SELECT id, attempt, $3, $4, started_at FROM moved
            RETURNING task_id, attempt
        )
        SELECT m.id, m.attempt, m.kind, m.spec, m.worker_group, m.data, m.data_time,
               m.timeout_ms, m.execute_user
        FROM moved m JOIN opened o ON o.task_id = m.id AND o.attempt = m.attempt
        UNION ALL
        -- the statement's snapshot predates `moved`: these are starts committed earlier
        SELECT t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
               t.timeout_ms, t.execute_user
        FROM tasks t
        WHERE (t.id, t.attempt) IN (SELECT id, attempt FROM wanted)
          AND t.status = 'running' AND t.worker_id = $3
        "#,
    )
    .bind(&ids)
    .bind(&numbers)
    .bind(worker.id)
    .bind(&worker.name)
    .bind(&groups)
    .bind(&kinds)
    .bind(&specs)
    .bind(&datas)
    .bind(&data_times)
    .bind(&timeouts)
    .bind(&users)
    .fetch_all(store.pool())
    .await
    .context("starting attempts")?;
    Ok(started.iter().map(|p| p.message(p.attempt)).collect())
}

/// Publishes the message of a `ready` attempt again, from its row, if the task is still at that
/// attempt and `ready`: for a worker that dropped a delivery of the attempt as a duplicate of a
/// message that turned out forged. A copy too many is harmless (one start wins).
pub async fn republish_ready_attempt(
    store: &Store,
    topology: &Topology,
    task_id: Uuid,
    attempt: i32,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let parts: Option<MessageParts> = sqlx::query_as(
        "SELECT id, attempt, kind, spec, worker_group, data, data_time, timeout_ms, execute_user
         FROM tasks WHERE id = $1 AND attempt = $2 AND status = 'ready' FOR UPDATE",
    )
    .bind(task_id)
    .bind(attempt)
    .fetch_optional(&mut *tx)
    .await
    .context("reading a ready attempt")?;
    let Some(parts) = parts else {
        return Ok(false);
    };
    enqueue_task_messages(&mut tx, topology, &[parts.message(attempt)]).await?;
    tx.commit()
        .await
        .context("committing a republished attempt")?;
    Ok(true)
}

/// A task's status and its current attempt as its row records it (the message that attempt
/// should have), or None if no such task exists: how a worker tells a duplicate or stale
/// message from one that differs from its row.
pub async fn recorded_attempt(
    store: &Store,
    task_id: Uuid,
) -> Result<Option<(TaskStatus, TaskMessage)>, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Row {
        status: String,
        #[sqlx(flatten)]
        parts: MessageParts,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT status, id, attempt, kind, spec, worker_group, data, data_time, timeout_ms,
                execute_user
         FROM tasks WHERE id = $1",
    )
    .bind(task_id)
    .fetch_optional(store.pool())
    .await
    .context("reading a task's current attempt")?;
    Ok(row.map(|r| {
        (
            r.status.parse().unwrap_or(TaskStatus::Failed),
            r.parts.message(r.parts.attempt),
        )
    }))
}

/// `running → succeeded | retrying | failed | killed` for attempts this worker ran: closes each
/// attempt's row and writes each task's event to the outbox, all in one statement.
///
/// A rejected attempt uses the reject budget and a failed one the failed budget, never each
/// other's: with budget left the task is `retrying` until `next_attempt_at` (the budget's interval
/// with the task's backoff, see `retry_delay` in the migrations; for a rejection, no sooner than
/// the job's Retry-After), else `failed` with the reason. A task that ends (not `retrying`) lets
/// its job's blocked triggers fire again.
///
/// Returns the `(task, attempt)` pairs that moved, with the status each task moved to; an attempt
/// missing from it is no longer this worker's (killed, or recovered elsewhere).
pub async fn finish_attempts(
    store: &Store,
    topology: &Topology,
    worker: &WorkerIdentity,
    finished: &[FinishedAttempt],
) -> Result<Vec<((Uuid, i32), TaskStatus)>, StoreError> {
    // An abandoned attempt is a lost one (release_attempts), not an end this statement records.
    let finished: Vec<&FinishedAttempt> = finished
        .iter()
        .filter(|f| !matches!(f.end, AttemptEnd::Abandoned(_)))
        .collect();
    let n = finished.len();
    let mut ids = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    let mut outcomes = Vec::with_capacity(n);
    let mut reasons: Vec<Option<&str>> = Vec::with_capacity(n);
    let mut results = Vec::with_capacity(n);
    let mut retry_after_ms = Vec::with_capacity(n);
    for f in finished {
        let (reason, result, retry_after) = match &f.end {
            AttemptEnd::Succeeded(result) => (None, result.clone(), None),
            AttemptEnd::Failed { result, reason } => (Some(*reason), result.clone(), None),
            AttemptEnd::Rejected {
                result,
                retry_after,
            } => (Some("rejected"), result.clone(), *retry_after),
            AttemptEnd::Killed(result) => (Some("killed"), result.clone(), None),
            AttemptEnd::Abandoned(result) => (Some("interrupted"), result.clone(), None),
        };
        ids.push(f.task_id);
        attempts.push(f.attempt);
        outcomes.push(f.end.outcome().as_str());
        reasons.push(reason);
        // A server's Retry-After is honoured up to a day.
        retry_after_ms.push(retry_after.map_or(0, |d| {
            i64::try_from(d.as_millis()).map_or(MAX_RETRY_AFTER_MS, |ms| ms.min(MAX_RETRY_AFTER_MS))
        }));
        results.push(storable(result));
    }
    let exit_codes: Vec<Option<i32>> = results.iter().map(|r| r.exit_code).collect();
    let errors: Vec<Option<&str>> = results.iter().map(|r| r.error.as_deref()).collect();
    let results: Vec<Json<&TaskResult>> = results.iter().map(Json).collect();
    let moved: Vec<(Uuid, i32, String)> = sqlx::query_as(
        r#"
        WITH ends AS (
            SELECT * FROM UNNEST($1::uuid[], $2::int[], $3::text[], $4::text[], $5::jsonb[],
                                 $6::bigint[], $7::int[], $8::text[])
                AS e(id, attempt, outcome, reason, result, retry_after_ms, exit_code, error)
        ), done AS (
            -- The fence (attempt, running, this worker) is in the UPDATE itself so that it is
            -- re-checked on the row's latest version if a kill or recovery got there first; the
            -- budgets are read from that same version.
            UPDATE tasks t SET
                -- a kill asked for while the attempt ran wins over a retry
                status = CASE
                    WHEN t.kill_requested_at IS NOT NULL AND e.outcome <> 'succeeded'
                        THEN 'killed'
                    WHEN retries_left(e.outcome, t.rejects, t.reject_retries, t.failures,
                                      t.failed_retries) THEN 'retrying'
                    WHEN e.outcome = 'rejected' THEN 'failed'
                    ELSE e.outcome END,
                rejects = t.rejects + (e.outcome = 'rejected')::int,
                failures = t.failures + (e.outcome = 'failed')::int,
                next_attempt_at = CASE
                    WHEN t.kill_requested_at IS NOT NULL THEN NULL
                    WHEN NOT retries_left(e.outcome, t.rejects, t.reject_retries, t.failures,
                                          t.failed_retries) THEN NULL
                    WHEN e.outcome = 'rejected' THEN now() + greatest(
                        retry_delay(t.backoff, t.reject_interval_ms, t.rejects + 1),
                        make_interval(secs => e.retry_after_ms / 1000.0))
                    ELSE now() + retry_delay(t.backoff, t.failed_interval_ms, t.failures + 1)
                    END,
                finished_at = CASE
                    WHEN t.kill_requested_at IS NULL
                         AND retries_left(e.outcome, t.rejects, t.reject_retries, t.failures,
                                          t.failed_retries) THEN NULL
                    ELSE now() END,
                reason = CASE WHEN t.kill_requested_at IS NOT NULL AND e.outcome <> 'succeeded'
                              THEN 'killed' ELSE e.reason END,
                result = e.result
            FROM ends e
            WHERE t.id = e.id AND t.attempt = e.attempt AND t.status = 'running'
              AND t.worker_id = $9
            RETURNING t.id, t.attempt, t.job_id, t.status, t.worker_group, t.data_time, e.outcome,
                      t.reason, e.exit_code, e.error, e.result, now() AS at
        ), attempt AS (
            UPDATE task_attempts a
            SET outcome = done.outcome, finished_at = done.at, exit_code = done.exit_code,
                error = done.error, output = coalesce(done.result->>'output', a.output)
            FROM done
            WHERE a.task_id = done.id AND a.attempt = done.attempt
        ), unblocked AS (
            -- a job that allows one task at a time may fire again once its task has ended
            UPDATE triggers SET state = 'waiting'
            FROM done
            WHERE triggers.job_id = done.job_id AND triggers.state = 'blocked'
              AND done.status <> 'retrying'
        ), event AS (
            -- every event of the batch in one (batched) outbox row
            INSERT INTO outbox (exchange, routing_key, body, batched)
            SELECT $10, '', jsonb_agg(jsonb_build_object(
                       'k', 'task.' || status || '.' || worker_group,
                       'b', task_event(id, attempt, status, worker_group, job_id, data_time,
                                       reason, at))), true
            FROM done
            HAVING count(*) > 0
        )
        SELECT id, attempt, status FROM done
        "#,
    )
    .bind(&ids)
    .bind(&attempts)
    .bind(&outcomes)
    .bind(&reasons)
    .bind(&results)
    .bind(&retry_after_ms)
    .bind(&exit_codes)
    .bind(&errors)
    .bind(worker.id)
    .bind(topology.events_exchange())
    .fetch_all(store.pool())
    .await
    .context("finishing attempts")?;
    moved
        .into_iter()
        .map(|(id, attempt, status)| Ok(((id, attempt), super::tasks::decode_status(&status)?)))
        .collect()
}

/// One fire of a trigger, as the scheduler records it.
#[derive(Debug, Clone)]
pub struct TriggerFire {
    /// The trigger.
    pub trigger_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The scheduled fire time: the task's data time, and when its message is released.
    pub sched_time: jiff::Timestamp,
    /// Priority of the fire.
    pub priority: i32,
    /// The task message (task id, spec, data …) to publish at `sched_time`.
    pub message: TaskMessage,
}

/// `(nothing) → ready | waiting` for a batch of trigger fires, in the caller's transaction: one
/// fired_triggers row and one task (copying its job's settings) per fire. A task of a job with
/// upstream dependencies is created `waiting`, with a `task.waiting` event for the dependency
/// service; any other task is `ready`, with its message in the outbox released at the fire time.
/// A (trigger, scheduled time) that fired already makes nothing: the unique key is the
/// exactly-once guarantee. Returns how many fires were new.
pub async fn record_trigger_fires(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    instance_id: &str,
    fires: &[TriggerFire],
) -> Result<u64, StoreError> {
    if fires.is_empty() {
        return Ok(0);
    }
    let task_ids: Vec<Uuid> = fires.iter().map(|f| f.message.task_id).collect();
    let trigger_ids: Vec<i64> = fires.iter().map(|f| f.trigger_id).collect();
    let job_ids: Vec<i64> = fires.iter().map(|f| f.job_id).collect();
    let times: Vec<jiff_sqlx::Timestamp> = fires.iter().map(|f| f.sched_time.into()).collect();
    let data_times: Vec<jiff_sqlx::Timestamp> = fires
        .iter()
        .map(|f| f.message.data_time.unwrap_or(f.sched_time).into())
        .collect();
    let priorities: Vec<i32> = fires.iter().map(|f| f.priority).collect();
    let data: Vec<Json<&serde_json::Value>> = fires.iter().map(|f| Json(&f.message.data)).collect();
    let groups: Vec<&str> = fires.iter().map(|f| f.message.group.as_str()).collect();
    let bodies: Vec<Json<&TaskMessage>> = fires.iter().map(|f| Json(&f.message)).collect();
    // The row takes what its message says (the job as the scheduler read it), so a job changed
    // between that read and this insert cannot make a genuine message differ from its row.
    let kinds: Vec<&str> = fires.iter().map(|f| f.message.kind.as_str()).collect();
    let specs: Vec<Json<&serde_json::Value>> =
        fires.iter().map(|f| Json(&f.message.spec)).collect();
    let timeouts: Vec<Option<i64>> = fires.iter().map(|f| f.message.timeout_ms).collect();
    let users: Vec<Option<&str>> = fires
        .iter()
        .map(|f| f.message.execute_user.as_deref())
        .collect();
    let created: i64 = sqlx::query_scalar(
        r#"
        WITH fire AS (
            SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[], $4::timestamptz[],
                                 $5::int[], $6::jsonb[], $7::text[], $8::jsonb[],
                                 $11::timestamptz[], $13::text[], $14::jsonb[], $15::bigint[],
                                 $16::text[])
                AS f(task_id, trigger_id, job_id, sched_time, priority, data, worker_group, body,
                     data_time, kind, spec, timeout_ms, execute_user)
        ), fired AS (
            INSERT INTO fired_triggers (trigger_id, job_id, task_id, instance_id, sched_time,
                                        priority)
            SELECT trigger_id, job_id, task_id, $9, sched_time, priority FROM fire
            ON CONFLICT (trigger_id, sched_time) DO NOTHING
            RETURNING task_id
        ), task AS (
            INSERT INTO tasks (id, job_id, trigger_id, kind, spec, worker_group, priority, status,
                               attempt, reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user, ready_at)
            SELECT f.task_id, j.id, f.trigger_id, f.kind, f.spec, f.worker_group, f.priority,
                   CASE WHEN EXISTS (SELECT 1 FROM job_dependencies d WHERE d.job_id = j.id)
                        THEN 'waiting' ELSE 'ready' END,
                   1, j.reject_retries, j.reject_interval_ms, j.failed_retries,
                   j.failed_interval_ms, j.backoff, f.timeout_ms, j.requests_recovery,
                   f.data_time, f.data, j.submit_user, f.execute_user, f.sched_time
            FROM fire f JOIN fired USING (task_id) JOIN jobs j ON j.id = f.job_id
            RETURNING id, status, job_id, data_time, worker_group
        ), message AS (
            INSERT INTO outbox (exchange, routing_key, body, publish_at, headers)
            SELECT $10, f.worker_group, f.body, f.sched_time,
                   jsonb_build_object('x-chime-scheduled-time', f.sched_time)
            FROM fire f JOIN task ON task.id = f.task_id
            WHERE task.status = 'ready'
        ), waiting AS (
            INSERT INTO outbox (exchange, routing_key, body, publish_at)
            SELECT $12, 'task.waiting.' || task.worker_group,
                   task_event(task.id, 1, 'waiting', task.worker_group, task.job_id,
                              task.data_time, NULL, now()),
                   f.sched_time
            FROM fire f JOIN task ON task.id = f.task_id
            WHERE task.status = 'waiting'
        )
        SELECT count(*) FROM task
        "#,
    )
    .bind(&task_ids)
    .bind(&trigger_ids)
    .bind(&job_ids)
    .bind(&times)
    .bind(&priorities)
    .bind(&data)
    .bind(&groups)
    .bind(&bodies)
    .bind(instance_id)
    .bind(topology.tasks_exchange())
    .bind(&data_times)
    .bind(topology.events_exchange())
    .bind(&kinds)
    .bind(&specs)
    .bind(&timeouts)
    .bind(&users)
    .fetch_one(tx)
    .await
    .context("recording trigger fires")?;
    Ok(created as u64)
}

/// `(nothing) → ready` for a job run on demand (`chime job run`): a task with the job's settings,
/// its data overlaid with `data`, for `data_time` (default now) truncated to the job's data-time
/// period as a fire's would be, submitted by `submit_user`, published at once.
pub async fn run_job_now(
    store: &Store,
    topology: &Topology,
    group: &str,
    name: &str,
    data: serde_json::Value,
    data_time: Option<jiff::Timestamp>,
    submit_user: Option<&str>,
) -> Result<Uuid, StoreError> {
    crate::model::check_json("data", &data).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let size = data.to_string().len();
    if size > crate::model::MAX_PAYLOAD_BYTES {
        return Err(StoreError::Invalid(format!(
            "data is {size} bytes, the limit is {}",
            crate::model::MAX_PAYLOAD_BYTES
        )));
    }
    #[derive(sqlx::FromRow)]
    struct Job {
        id: i64,
        kind: String,
        spec: Json<serde_json::Value>,
        worker_group: String,
        data: Json<serde_json::Value>,
        timeout_ms: Option<i64>,
        execute_user: Option<String>,
        data_time_period: Option<String>,
        now: jiff_sqlx::Timestamp,
    }
    let job: Option<Job> = sqlx::query_as(
        "SELECT id, kind, spec, worker_group, data, timeout_ms, execute_user,
                period_in_zone(data_time_period, data_time_zone) AS data_time_period,
                now() AS now
         FROM jobs WHERE group_name = $1 AND name = $2",
    )
    .bind(group)
    .bind(name)
    .fetch_optional(store.pool())
    .await
    .context("reading the job")?;
    let job = job.ok_or_else(|| StoreError::NotFound(format!("job {group}.{name}")))?;
    let mut merged = job.data.0;
    if let (Some(base), Some(extra)) = (merged.as_object_mut(), data.as_object()) {
        for (key, value) in extra {
            base.insert(key.clone(), value.clone());
        }
    }
    let message = TaskMessage {
        v: MESSAGE_VERSION,
        task_id: Uuid::now_v7(),
        attempt: 1,
        kind: job.kind,
        group: job.worker_group,
        spec: job.spec.0,
        data: merged,
        data_time: Some(super::dependencies::data_time_of(
            job.data_time_period.as_deref(),
            data_time.unwrap_or(job.now.to_jiff()),
        )),
        timeout_ms: job.timeout_ms,
        execute_user: job.execute_user,
    };
    sqlx::query(
        r#"
        WITH task AS (
            INSERT INTO tasks (id, job_id, kind, spec, worker_group, priority, status, attempt,
                               reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user, ready_at)
            -- kind, spec, group, timeout and user as the message says (the job as read above)
            SELECT $1, j.id, $8, $9, $10, j.priority, 'ready', 1,
                   j.reject_retries, j.reject_interval_ms, j.failed_retries, j.failed_interval_ms,
                   j.backoff, $11, j.requests_recovery, $3, $4,
                   coalesce($7, j.submit_user), $12, now()
            FROM jobs j WHERE j.id = $2
            RETURNING worker_group
        )
        INSERT INTO outbox (exchange, routing_key, body)
        SELECT $5, worker_group, $6 FROM task
        "#,
    )
    .bind(message.task_id)
    .bind(job.id)
    .bind(message.data_time.map(jiff_sqlx::Timestamp::from))
    .bind(Json(&message.data))
    .bind(topology.tasks_exchange())
    .bind(Json(&message))
    .bind(submit_user)
    .bind(&message.kind)
    .bind(Json(&message.spec))
    .bind(&message.group)
    .bind(message.timeout_ms)
    .bind(message.execute_user.as_deref())
    .execute(store.pool())
    .await
    .context("running the job")?;
    Ok(message.task_id)
}

/// What a task message is made of, as read back from a task row.
#[derive(sqlx::FromRow)]
struct MessageParts {
    id: Uuid,
    attempt: i32,
    kind: String,
    spec: Json<serde_json::Value>,
    worker_group: String,
    data: Json<serde_json::Value>,
    data_time: Option<jiff_sqlx::Timestamp>,
    timeout_ms: Option<i64>,
    execute_user: Option<String>,
}

impl MessageParts {
    /// The message of `attempt` of this task.
    fn message(&self, attempt: i32) -> TaskMessage {
        TaskMessage {
            v: MESSAGE_VERSION,
            task_id: self.id,
            attempt,
            kind: self.kind.clone(),
            group: self.worker_group.clone(),
            spec: self.spec.0.clone(),
            data: self.data.0.clone(),
            data_time: self.data_time.map(|t| t.to_jiff()),
            timeout_ms: self.timeout_ms,
            execute_user: self.execute_user.clone(),
        }
    }
}

/// Writes task messages to the outbox, routed to their worker groups, in the caller's
/// transaction.
async fn enqueue_task_messages(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    messages: &[TaskMessage],
) -> Result<(), StoreError> {
    if messages.is_empty() {
        return Ok(());
    }
    let groups: Vec<&str> = messages.iter().map(|m| m.group.as_str()).collect();
    let bodies: Vec<Json<&TaskMessage>> = messages.iter().map(Json).collect();
    sqlx::query(
        "INSERT INTO outbox (exchange, routing_key, body)
         SELECT $1, g, b FROM UNNEST($2::text[], $3::jsonb[]) AS u(g, b)",
    )
    .bind(topology.tasks_exchange())
    .bind(&groups)
    .bind(&bodies)
    .execute(tx)
    .await
    .context("writing task messages to the outbox")?;
    Ok(())
}

/// `retrying → ready` for tasks whose `next_attempt_at` has come: the next attempt's message goes
/// to the outbox in the same transaction (delayed redelivery lives here, not in the broker).
/// Returns how many were released.
pub async fn release_due_retries(
    store: &Store,
    topology: &Topology,
    limit: i64,
) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let released: Vec<MessageParts> = sqlx::query_as(
        r#"
        UPDATE tasks t
        SET status = 'ready', attempt = t.attempt + 1, ready_at = now(), next_attempt_at = NULL,
            worker_id = NULL, started_at = NULL
        FROM (
            SELECT id FROM tasks
            WHERE status = 'retrying' AND next_attempt_at <= now()
            ORDER BY next_attempt_at
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        ) due
        WHERE t.id = due.id
        RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                  t.timeout_ms, t.execute_user
        "#,
    )
    .bind(limit)
    .fetch_all(&mut *tx)
    .await
    .context("releasing due retries")?;
    let messages: Vec<TaskMessage> = released.iter().map(|r| r.message(r.attempt)).collect();
    enqueue_task_messages(&mut tx, topology, &messages).await?;
    tx.commit().await.context("committing released retries")?;
    Ok(released.len())
}

/// The advisory lock that lets one scheduler instance at a time recover lost attempts.
const RECOVERY_LOCK: i64 = 0x6368_696d_6572_6563; // "chimerec"

/// Which running attempts [`recover_lost_attempts`] looks at.
#[derive(Debug, Clone, Copy)]
pub enum LostScope {
    /// Every attempt whose worker is gone, oldest first, up to a limit.
    All {
        /// The most to recover in one call.
        limit: i64,
    },
    /// Only this attempt (a redelivered message found it running under another worker), if that
    /// worker is gone by the same test as [`LostScope::All`].
    Attempt {
        /// The task.
        task_id: Uuid,
        /// The attempt.
        attempt: i32,
    },
}

/// Why a worker gives up attempts that are still `running` under it ([`release_attempts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Its shutdown cut them short (past the grace): handled as if the worker had died, so the
    /// job's `requests_recovery` decides, never its failed budget alone.
    Interrupted,
    /// It does not hold them (their start committed while it saw an error): they never ran, so
    /// they run again as the next attempt whatever the job says.
    NeverRan,
}

/// `running → ready (next attempt) | retrying | failed | killed` for attempts whose worker is
/// gone: the attempt is closed as `lost`; a task whose kill was requested ends `killed`; a job
/// that requests recovery runs again as the next attempt; otherwise the failed budget decides
/// (reason `lost`). One caller at a time (advisory lock); returns how many were recovered.
///
/// A worker is gone when it said so (`offline`), or — only if `may_declare_dead` — when its lease
/// has expired by the database's clock (see `workers.rs`); such a worker is marked `offline`
/// here. Its heartbeat, if it comes at that moment, waits for this transaction on the worker's
/// row and then learns which attempts were taken; one that comes first renews the lease and
/// the worker is not declared dead. For [`workers::RESTART_GRACE`] after recovery first saw the
/// database up again, restarted (a new `pg_postmaster_start_time()`) or recovered from a crash
/// (the `UNLOGGED` table `server_starts` came back empty), nobody is declared dead: every lease
/// ran out while it was away.
///
/// [`workers::RESTART_GRACE`]: super::workers::RESTART_GRACE
pub async fn recover_lost_attempts(
    conn: &mut sqlx::PgConnection,
    topology: &Topology,
    scope: LostScope,
    may_declare_dead: bool,
) -> Result<usize, StoreError> {
    use super::workers::STALE_AFTER;
    use sqlx::Connection;
    let (only_task, only_attempt, limit) = match scope {
        LostScope::All { limit } => (None, None, limit),
        LostScope::Attempt { task_id, attempt } => (Some(task_id), Some(attempt), 1),
    };
    let mut tx = conn.begin().await.context("starting a transaction")?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(RECOVERY_LOCK)
        .fetch_one(&mut *tx)
        .await
        .context("taking the recovery lock")?;
    if !locked {
        return Ok(0);
    }
    if may_declare_dead && !store_restarted_recently(&mut tx).await? {
        // A worker row without a lease (written by an older version) is dead once its heartbeat
        // is STALE_AFTER old.
        sqlx::query(
            r#"
            UPDATE workers w SET status = 'offline', stopped_at = now()
            WHERE w.status IN ('online', 'draining', 'disconnected')
              AND coalesce(w.lease_expires_at,
                           w.last_heartbeat + make_interval(secs => $1)) < now()
            "#,
        )
        .bind(STALE_AFTER.as_secs_f64())
        .execute(&mut *tx)
        .await
        .context("declaring dead workers")?;
    }
    let lost: Vec<(Uuid, i32)> = sqlx::query_as(
        r#"
        SELECT t.id, t.attempt
        FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id
        WHERE t.status = 'running' AND (w.id IS NULL OR w.status = 'offline')
          AND ($2::uuid IS NULL OR (t.id = $2 AND t.attempt = $3))
        ORDER BY t.started_at
        LIMIT $1
        FOR UPDATE OF t SKIP LOCKED
        "#,
    )
    .bind(limit)
    .bind(only_task)
    .bind(only_attempt)
    .fetch_all(&mut *tx)
    .await
    .context("finding lost attempts")?;
    let recovered = close_lost_attempts(
        &mut tx,
        topology,
        &lost,
        None,
        false,
        "its worker stopped responding",
    )
    .await?;
    tx.commit().await.context("committing recovery")?;
    Ok(recovered)
}

/// Whether recovery first saw the database up, after a restart or a crash recovery, less than
/// [`workers::RESTART_GRACE`] ago (see [`recover_lost_attempts`]); records the first sighting of
/// a new server start, which begins the grace.
///
/// [`workers::RESTART_GRACE`]: super::workers::RESTART_GRACE
async fn store_restarted_recently(tx: &mut sqlx::PgConnection) -> Result<bool, StoreError> {
    // Under the recovery lock: one caller at a time records a sighting.
    sqlx::query_scalar(
        r#"
        WITH seen AS (
            SELECT first_seen_at FROM server_starts
            WHERE postmaster_started_at = pg_postmaster_start_time()
        ), forgotten AS (
            DELETE FROM server_starts
            WHERE postmaster_started_at <> pg_postmaster_start_time()
        ), recorded AS (
            INSERT INTO server_starts (postmaster_started_at, first_seen_at)
            SELECT pg_postmaster_start_time(), now() WHERE NOT EXISTS (SELECT FROM seen)
        )
        SELECT coalesce((SELECT first_seen_at FROM seen), now())
               > now() - make_interval(secs => $1)
        "#,
    )
    .bind(super::workers::RESTART_GRACE.as_secs_f64())
    .fetch_one(tx)
    .await
    .context("asking whether the database restarted")
}

/// `running → ready (next attempt) | retrying | failed | killed` for attempts still running under
/// `worker` that it gives up, as `why` says (see [`Release`]). Returns how many moved.
pub async fn release_attempts(
    store: &Store,
    topology: &Topology,
    worker: &WorkerIdentity,
    attempts: &[(Uuid, i32)],
    why: Release,
) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let (rerun, error) = match why {
        Release::Interrupted => (false, "interrupted: its worker stopped before it ended"),
        Release::NeverRan => (true, "its worker never ran it"),
    };
    let moved =
        close_lost_attempts(&mut tx, topology, attempts, Some(worker.id), rerun, error).await?;
    tx.commit().await.context("committing released attempts")?;
    Ok(moved)
}

/// The one transition of a lost attempt, in the caller's transaction: closes each attempt (if it
/// is still running, under `worker` when given) as `lost` with `error`, and moves its task to
/// `killed` (kill requested), `ready` as the next attempt (`requests_recovery`, or `rerun`),
/// `retrying` (failed budget left) or `failed`, reason `lost`; events and re-run messages go to
/// the outbox.
async fn close_lost_attempts(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    attempts: &[(Uuid, i32)],
    worker: Option<Uuid>,
    rerun: bool,
    error: &str,
) -> Result<usize, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Recovered {
        #[sqlx(flatten)]
        parts: MessageParts,
        status: String,
    }
    if attempts.is_empty() {
        return Ok(0);
    }
    let (ids, numbers): (Vec<Uuid>, Vec<i32>) = attempts.iter().copied().unzip();
    let recovered: Vec<Recovered> = sqlx::query_as(
        r#"
        WITH lost AS (
            SELECT t.id, t.attempt, CASE
                WHEN t.kill_requested_at IS NOT NULL THEN 'killed'
                WHEN t.requests_recovery OR $4 THEN 'ready'
                WHEN t.failures < t.failed_retries THEN 'retrying'
                ELSE 'failed' END AS next_status
            FROM tasks t JOIN UNNEST($1::uuid[], $2::int[]) AS c(id, attempt)
                ON t.id = c.id AND t.attempt = c.attempt
            WHERE t.status = 'running' AND ($3::uuid IS NULL OR t.worker_id = $3)
            FOR UPDATE OF t
        ), closed AS (
            UPDATE task_attempts a SET outcome = 'lost', finished_at = now(), error = $5
            FROM lost WHERE a.task_id = lost.id AND a.attempt = lost.attempt
        ), moved AS (
            UPDATE tasks t SET
                status = lost.next_status,
                attempt = t.attempt + (lost.next_status = 'ready')::int,
                failures = t.failures + (lost.next_status IN ('retrying', 'failed'))::int,
                worker_id = NULL,
                started_at = CASE WHEN lost.next_status = 'ready' THEN NULL ELSE t.started_at END,
                ready_at = CASE WHEN lost.next_status = 'ready' THEN now() ELSE t.ready_at END,
                republished_at = NULL,
                next_attempt_at = CASE WHEN lost.next_status = 'retrying' THEN
                    now() + retry_delay(t.backoff, t.failed_interval_ms, t.failures + 1) END,
                finished_at = CASE WHEN lost.next_status IN ('failed', 'killed') THEN now() END,
                reason = CASE lost.next_status WHEN 'killed' THEN 'killed' ELSE 'lost' END,
                result = jsonb_build_object('error', $5::text, 'output', '')
            FROM lost WHERE t.id = lost.id
            RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                      t.timeout_ms, t.execute_user, t.job_id, t.status, t.reason
        ), unblocked AS (
            UPDATE triggers SET state = 'waiting'
            FROM moved
            WHERE triggers.job_id = moved.job_id AND triggers.state = 'blocked'
              AND moved.status IN ('failed', 'killed')
        ), events AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $6, 'task.' || status || '.' || worker_group,
                   task_event(id, attempt, status, worker_group, job_id, data_time, reason, now())
            FROM moved
        )
        SELECT id, attempt, kind, spec, worker_group, data, data_time, timeout_ms, execute_user,
               status
        FROM moved
        "#,
    )
    .bind(&ids)
    .bind(&numbers)
    .bind(worker)
    .bind(rerun)
    .bind(error)
    .bind(topology.events_exchange())
    .fetch_all(&mut *tx)
    .await
    .context("recovering lost attempts")?;
    let reruns: Vec<TaskMessage> = recovered
        .iter()
        .filter(|r| r.status == "ready")
        .map(|r| r.parts.message(r.parts.attempt))
        .collect();
    enqueue_task_messages(&mut *tx, topology, &reruns).await?;
    Ok(recovered.len())
}

/// Publishes again the message of `ready` tasks that no worker has started for `older_than`
/// (since they became ready, or since their last re-publish), in the groups given: the database is
/// the truth, so a task message lost on the bus (dead-lettered during an outage, or dropped with
/// its queue) cannot strand a task. The caller names only groups whose queue holds no message, so
/// a backlog is not doubled. A duplicate is harmless: the attempt starts once. Returns how many
/// were re-published.
///
/// `only_recovered` limits it to tasks that recovery made ready (reason `lost`), which are worth
/// a much shorter `older_than`: their message may sit unacknowledged in the consumer of the
/// frozen worker they were taken from, which the broker believes alive until its connection
/// times out.
pub async fn republish_stale_ready(
    store: &Store,
    topology: &Topology,
    groups: &[String],
    older_than: std::time::Duration,
    only_recovered: bool,
    limit: i64,
) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let stale: Vec<MessageParts> = sqlx::query_as(
        r#"
        UPDATE tasks t SET republished_at = now()
        FROM (
            SELECT id FROM tasks
            WHERE status = 'ready' AND worker_group = ANY($1)
              AND coalesce(republished_at, ready_at, created_at)
                  < now() - make_interval(secs => $2)
              AND (NOT $4 OR reason = 'lost')
            ORDER BY id
            LIMIT $3
            FOR UPDATE SKIP LOCKED
        ) s
        WHERE t.id = s.id
        RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                  t.timeout_ms, t.execute_user
        "#,
    )
    .bind(groups)
    .bind(older_than.as_secs_f64())
    .bind(limit)
    .bind(only_recovered)
    .fetch_all(&mut *tx)
    .await
    .context("finding ready tasks no worker started")?;
    let messages: Vec<TaskMessage> = stale.iter().map(|t| t.message(t.attempt)).collect();
    enqueue_task_messages(&mut tx, topology, &messages).await?;
    tx.commit()
        .await
        .context("committing re-published messages")?;
    Ok(stale.len())
}

/// The worker groups that have `ready` tasks no worker has started for `older_than` (only those
/// recovery made ready, with `only_recovered`).
pub async fn groups_with_stale_ready(
    store: &Store,
    older_than: std::time::Duration,
    only_recovered: bool,
) -> Result<Vec<String>, StoreError> {
    sqlx::query_scalar(
        "SELECT DISTINCT worker_group FROM tasks
         WHERE status = 'ready'
           AND coalesce(republished_at, ready_at, created_at) < now() - make_interval(secs => $1)
           AND (NOT $2 OR reason = 'lost')",
    )
    .bind(older_than.as_secs_f64())
    .bind(only_recovered)
    .fetch_all(store.pool())
    .await
    .context("finding groups with stale ready tasks")
}

/// What [`kill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The task was waiting, ready or retrying: it is `killed` now.
    Killed,
    /// The task is running: its worker was told (through the control exchange) to kill it; the
    /// worker records `killed` when the process is gone.
    Signalled,
    /// The task had already ended (its status is returned); nothing changed.
    AlreadyEnded(TaskStatus),
}

/// The part of [`kill_statement`] after the tasks are picked.
macro_rules! kill_moves {
    () => {
        r#"
        ), moved AS (
            UPDATE tasks t SET
                status = CASE WHEN c.before = 'running' THEN 'running' ELSE 'killed' END,
                kill_requested_at = now(),
                finished_at = CASE WHEN c.before = 'running' THEN NULL ELSE now() END,
                next_attempt_at = NULL,
                reason = CASE WHEN c.before = 'running' THEN t.reason ELSE 'killed' END
            FROM current c
            WHERE t.id = c.id AND c.before IN ('waiting', 'ready', 'retrying', 'running')
            RETURNING t.id, t.attempt, t.status, t.worker_group, t.job_id, t.data_time,
                      c.before, c.worker_id
        ), unblocked AS (
            UPDATE triggers SET state = 'waiting'
            FROM moved
            WHERE triggers.job_id = moved.job_id AND triggers.state = 'blocked'
              AND moved.status = 'killed'
        ), events AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $2, 'task.killed.' || worker_group,
                   task_event(id, attempt, status, worker_group, job_id, data_time, 'killed',
                              now())
            FROM moved WHERE status = 'killed'
        ), command AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $3, worker_id::text,
                   jsonb_build_object('v', 1, 'command', 'kill', 'task_id', id,
                                      'attempt', attempt)
            FROM moved WHERE status = 'running' AND worker_id IS NOT NULL
        )
        "#
    };
}

/// The kill transition of the tasks `$selection` picks (a `WHERE` clause on `tasks` with `$1`):
/// `waiting | ready | retrying → killed`, a running one's kill requested and its worker told, in
/// one statement. Written once here; [`kill`] picks one task, [`kill_backfill`] a backfill's.
macro_rules! kill_statement {
    ($selection:literal, $tail:literal) => {
        concat!(
            "WITH current AS (
                SELECT id, status AS before, worker_id FROM tasks WHERE ",
            $selection,
            " FOR UPDATE",
            kill_moves!(),
            $tail
        )
    };
}

/// Kills a task: `waiting | ready | retrying → killed` in the database alone (a `ready` task's
/// message, if already published, is dropped by the worker because the attempt is no longer
/// ready); a `running` task gets its kill request recorded and a kill command for its worker in
/// the outbox, in the same statement.
pub async fn kill(
    store: &Store,
    topology: &Topology,
    task_id: Uuid,
) -> Result<KillOutcome, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Killed {
        before: String,
        after: String,
    }
    let row: Option<Killed> = sqlx::query_as(kill_statement!(
        "id = $1",
        " SELECT c.before, coalesce(m.status, c.before) AS after
          FROM current c LEFT JOIN moved m ON m.id = c.id"
    ))
    .bind(task_id)
    .bind(topology.events_exchange())
    .bind(topology.control_exchange())
    .fetch_optional(store.pool())
    .await
    .context("killing the task")?;
    let row = row.ok_or(StoreError::TaskNotFound(task_id))?;
    let status = |s: &str| {
        s.parse::<TaskStatus>().map_err(|e| StoreError::Database {
            context: "reading a task's status",
            source: sqlx::Error::Decode(Box::new(e)),
        })
    };
    Ok(match (status(&row.before)?, status(&row.after)?) {
        (TaskStatus::Running, TaskStatus::Running) => KillOutcome::Signalled,
        (_, TaskStatus::Killed) if row.before != "killed" => KillOutcome::Killed,
        (before, _) => KillOutcome::AlreadyEnded(before),
    })
}

/// What [`advance_dependent`] did for a (job, data time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advanced {
    /// Its waiting task became ready, or a ready task was created for it.
    Ready(Uuid),
    /// Its waiting task failed (`upstream_failed`), or a failed task was recorded for it.
    Failed(Uuid),
    /// It had been advanced before (a duplicate event, or another dependency service).
    AlreadyDone,
    /// Nothing to move: no waiting task, and the job makes its own (its trigger has not fired
    /// for that data time yet), or a task for it exists already.
    NothingToMove,
}

/// How a dependency advance was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyOutcome {
    /// Every upstream run succeeded.
    Met,
    /// An upstream failed for good under the `fail` policy.
    UpstreamFailed,
}

/// `waiting → ready | failed` for job `job_id`'s task for `data_time`, once per (job, data time)
/// (the `dependency_advances` key, taken in the same transaction): `Met` makes the waiting task
/// ready with its message in the outbox; `UpstreamFailed` fails it with reason `upstream_failed`
/// and its event (which the dependency service hears, so the failure propagates). Without a
/// waiting task, a job with no trigger of its own (or a downstream of a backfill made
/// `with_downstream`, given as `lineage`) gets a task created for the data time.
pub async fn advance_dependent(
    store: &Store,
    topology: &Topology,
    job_id: i64,
    data_time: jiff::Timestamp,
    outcome: DependencyOutcome,
    lineage: Option<(i64, bool)>,
) -> Result<Advanced, StoreError> {
    let mut tx = store.begin().await?;
    let label = match outcome {
        DependencyOutcome::Met => "ready",
        DependencyOutcome::UpstreamFailed => "failed",
    };
    let first: Option<i64> = sqlx::query_scalar(
        "INSERT INTO dependency_advances (job_id, data_time, outcome) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING RETURNING job_id",
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(data_time))
    .bind(label)
    .fetch_optional(&mut *tx)
    .await
    .context("recording the advance")?;
    let (new_status, reason) = match outcome {
        DependencyOutcome::Met => ("ready", None),
        DependencyOutcome::UpstreamFailed => ("failed", Some("upstream_failed")),
    };
    let moved: Vec<MessageParts> = sqlx::query_as(
        r#"
        UPDATE tasks SET status = $3, ready_at = CASE WHEN $3 = 'ready' THEN now() END,
               finished_at = CASE WHEN $3 = 'failed' THEN now() END, reason = $4
        WHERE job_id = $1 AND data_time = $2 AND status = 'waiting' AND backfill_id IS NULL
        RETURNING id, attempt, kind, spec, worker_group, data, data_time, timeout_ms, execute_user
        "#,
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(data_time))
    .bind(new_status)
    .bind(reason)
    .fetch_all(&mut *tx)
    .await
    .context("advancing the waiting task")?;
    // Every waiting task of the job for D moves (a job whose trigger fires more often than its
    // data-time period has several). One made after (job, D) advanced — a second trigger, or a
    // trigger firing again within the period — moves the same way: it must not wait for an event
    // that already happened. Creating a task is for the first advance only.
    let tasks: Vec<MessageParts> = match (moved.is_empty(), first.is_some()) {
        (false, _) => moved,
        (true, false) => return Ok(Advanced::AlreadyDone),
        (true, true) => {
            // No waiting task: create one if the job does not make its own, and no task exists.
            let backfill = lineage.map(|(id, _)| id);
            let with_downstream = lineage.is_some_and(|(_, w)| w);
            let created: Option<MessageParts> = sqlx::query_as(
                r#"
                INSERT INTO tasks (id, job_id, kind, spec, worker_group, priority, status,
                                   attempt, reject_retries, reject_interval_ms, failed_retries,
                                   failed_interval_ms, backoff, timeout_ms, requests_recovery,
                                   data_time, data, submit_user, execute_user, ready_at,
                                   finished_at, reason, backfill_id)
                SELECT $1, j.id, j.kind, j.spec, j.worker_group, j.priority, $4, 1,
                       j.reject_retries, j.reject_interval_ms, j.failed_retries,
                       j.failed_interval_ms, j.backoff, j.timeout_ms, j.requests_recovery, $3,
                       j.data, j.submit_user, j.execute_user,
                       CASE WHEN $4 = 'ready' THEN now() END,
                       CASE WHEN $4 = 'failed' THEN now() END, $5, $6
                FROM jobs j
                WHERE j.id = $2
                  AND ($7 OR NOT EXISTS (SELECT 1 FROM triggers t WHERE t.job_id = j.id))
                  AND NOT EXISTS (SELECT 1 FROM tasks x WHERE x.job_id = j.id AND x.data_time = $3)
                RETURNING id, attempt, kind, spec, worker_group, data, data_time, timeout_ms,
                          execute_user
                "#,
            )
            .bind(Uuid::now_v7())
            .bind(job_id)
            .bind(jiff_sqlx::Timestamp::from(data_time))
            .bind(new_status)
            .bind(reason)
            .bind(backfill)
            .bind(with_downstream)
            .fetch_optional(&mut *tx)
            .await
            .context("creating the downstream task")?;
            match created {
                Some(task) => vec![task],
                // Leave no advance record: the job's own trigger will make the task later.
                None => return Ok(Advanced::NothingToMove),
            }
        }
    };
    let ids: Vec<Uuid> = tasks.iter().map(|t| t.id).collect();
    match outcome {
        DependencyOutcome::Met => {
            let messages: Vec<TaskMessage> = tasks.iter().map(|t| t.message(t.attempt)).collect();
            enqueue_task_messages(&mut tx, topology, &messages).await?;
        }
        DependencyOutcome::UpstreamFailed => {
            sqlx::query(
                r#"INSERT INTO outbox (exchange, routing_key, body)
                   SELECT $1, 'task.failed.' || worker_group,
                          task_event(id, attempt, 'failed', worker_group, job_id, data_time,
                                     'upstream_failed', now())
                   FROM tasks WHERE id = ANY($2)"#,
            )
            .bind(topology.events_exchange())
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .context("writing the failures' events")?;
        }
    }
    let task = &tasks[0];
    sqlx::query(
        "UPDATE dependency_advances SET task_id = coalesce(task_id, $3)
         WHERE job_id = $1 AND data_time = $2",
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(data_time))
    .bind(task.id)
    .execute(&mut *tx)
    .await
    .context("recording the advanced task")?;
    tx.commit().await.context("committing the advance")?;
    Ok(match outcome {
        DependencyOutcome::Met => Advanced::Ready(task.id),
        DependencyOutcome::UpstreamFailed => Advanced::Failed(task.id),
    })
}

/// `failed | killed | succeeded → ready` as a new attempt (`chime task rerun`): budgets start
/// again; its success advances downstream tasks still waiting for it.
pub async fn rerun(store: &Store, topology: &Topology, task_id: Uuid) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    let current: Option<String> =
        sqlx::query_scalar("SELECT status FROM tasks WHERE id = $1 FOR UPDATE")
            .bind(task_id)
            .fetch_optional(&mut *tx)
            .await
            .context("reading the task")?;
    let current = current.ok_or(StoreError::TaskNotFound(task_id))?;
    if !matches!(current.as_str(), "failed" | "killed" | "succeeded") {
        return Err(StoreError::Conflict(format!(
            "task {task_id} is {current}: only a task that has ended can be re-run"
        )));
    }
    let task: MessageParts = sqlx::query_as(
        r#"
        UPDATE tasks SET status = 'ready', attempt = attempt + 1, rejects = 0, failures = 0,
               ready_at = now(), started_at = NULL, finished_at = NULL, next_attempt_at = NULL,
               worker_id = NULL, kill_requested_at = NULL, reason = NULL, result = NULL
        WHERE id = $1
        RETURNING id, attempt, kind, spec, worker_group, data, data_time, timeout_ms, execute_user
        "#,
    )
    .bind(task_id)
    .fetch_one(&mut *tx)
    .await
    .context("re-running the task")?;
    enqueue_task_messages(&mut tx, topology, &[task.message(task.attempt)]).await?;
    tx.commit().await.context("committing the rerun")?;
    Ok(())
}

/// `(nothing) → waiting` for a backfill's tasks, one per data time, then the first
/// `parallelism` of them `ready` (see [`promote_backfill`]). Returns the backfill's id.
pub async fn create_backfill(
    store: &Store,
    topology: &Topology,
    job_id: i64,
    range: (jiff::Timestamp, jiff::Timestamp),
    parallelism: i32,
    with_downstream: bool,
    data_times: &[jiff::Timestamp],
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO backfills (job_id, from_time, to_time, parallelism, with_downstream)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(range.0))
    .bind(jiff_sqlx::Timestamp::from(range.1))
    .bind(parallelism)
    .bind(with_downstream)
    .fetch_one(&mut *tx)
    .await
    .context("recording the backfill")?;
    let ids: Vec<Uuid> = data_times.iter().map(|_| Uuid::now_v7()).collect();
    let times: Vec<jiff_sqlx::Timestamp> = data_times.iter().map(|t| (*t).into()).collect();
    sqlx::query(
        r#"
        INSERT INTO tasks (id, job_id, kind, spec, worker_group, priority, status, attempt,
                           reject_retries, reject_interval_ms, failed_retries, failed_interval_ms,
                           backoff, timeout_ms, requests_recovery, data_time, data, submit_user,
                           execute_user, backfill_id)
        SELECT b.id, j.id, j.kind, j.spec, j.worker_group, j.priority, 'waiting', 1,
               j.reject_retries, j.reject_interval_ms, j.failed_retries, j.failed_interval_ms,
               j.backoff, j.timeout_ms, j.requests_recovery, b.data_time, j.data, j.submit_user,
               j.execute_user, $4
        FROM UNNEST($1::uuid[], $2::timestamptz[]) AS b(id, data_time), jobs j
        WHERE j.id = $3
        "#,
    )
    .bind(&ids)
    .bind(&times)
    .bind(job_id)
    .bind(id)
    .execute(&mut *tx)
    .await
    .context("creating the backfill's tasks")?;
    promote_backfill_in(&mut tx, topology, id).await?;
    tx.commit().await.context("committing the backfill")?;
    Ok(id)
}

/// `waiting → ready` for a backfill's next tasks, by data time, so that at most its parallelism
/// are ready, running or retrying. Called when one of its tasks ends. Returns how many moved.
pub async fn promote_backfill(
    store: &Store,
    topology: &Topology,
    backfill_id: i64,
) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let promoted = promote_backfill_in(&mut tx, topology, backfill_id).await?;
    tx.commit().await.context("committing the promotion")?;
    Ok(promoted)
}

async fn promote_backfill_in(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    backfill_id: i64,
) -> Result<usize, StoreError> {
    // The backfill's row lock serialises promoters, so the parallelism holds; it is taken in a
    // statement of its own so that the count below sees what an earlier promoter committed.
    sqlx::query("SELECT 1 FROM backfills WHERE id = $1 FOR UPDATE")
        .bind(backfill_id)
        .execute(&mut *tx)
        .await
        .context("locking the backfill")?;
    let promoted: Vec<MessageParts> = sqlx::query_as(
        r#"
        WITH backfill AS (
            SELECT id, job_id, parallelism FROM backfills WHERE id = $1
        ), active AS (
            SELECT count(*) AS n FROM tasks t, backfill b
            WHERE t.backfill_id = b.id AND t.job_id = b.job_id
              AND t.status IN ('ready', 'running', 'retrying')
        ), next AS (
            SELECT t.id FROM tasks t, backfill b
            WHERE t.backfill_id = b.id AND t.job_id = b.job_id AND t.status = 'waiting'
            ORDER BY t.data_time
            LIMIT greatest(0, (SELECT parallelism FROM backfill) - (SELECT n FROM active))
        )
        UPDATE tasks t SET status = 'ready', ready_at = now()
        FROM next WHERE t.id = next.id AND t.status = 'waiting'
        RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                  t.timeout_ms, t.execute_user
        "#,
    )
    .bind(backfill_id)
    .fetch_all(&mut *tx)
    .await
    .context("promoting backfill tasks")?;
    let messages: Vec<TaskMessage> = promoted.iter().map(|p| p.message(p.attempt)).collect();
    enqueue_task_messages(&mut *tx, topology, &messages).await?;
    Ok(promoted.len())
}

/// Kills every task of backfill `backfill_id` that has not ended (see [`kill`]); returns how many
/// were killed or signalled.
pub async fn kill_backfill(
    store: &Store,
    topology: &Topology,
    backfill_id: i64,
) -> Result<u64, StoreError> {
    let moved: i64 = sqlx::query_scalar(kill_statement!(
        "backfill_id = $1 AND status IN ('waiting', 'ready', 'retrying', 'running') ORDER BY id",
        " SELECT count(*) FROM moved"
    ))
    .bind(backfill_id)
    .bind(topology.events_exchange())
    .bind(topology.control_exchange())
    .fetch_one(store.pool())
    .await
    .context("cancelling the backfill")?;
    Ok(moved.unsigned_abs())
}
