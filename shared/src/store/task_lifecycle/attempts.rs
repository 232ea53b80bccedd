//! An attempt's life on its worker: `ready → running` when the worker starts it, `running →
//! succeeded | retrying | failed | killed` when it ends, and `retrying → ready` when its retry
//! is due.

use sqlx::types::Json;
use uuid::Uuid;

use super::{
    MessageParts, WorkerIdentity, commit, enqueue_current_attempts, enqueue_task_messages,
};
use crate::bus::Topology;
use crate::model::{AttemptOutcome, TaskMessage, TaskResult, TaskStatus};
use crate::store::{Context, Store, StoreError};

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
    /// The worker let it go before its command started, because the lease it took the attempt
    /// under ran out meanwhile (recovery may have taken the attempt since): nothing ran.
    /// Recorded by [`release_attempts`] as never run ([`Release::NeverRan`]): the task goes on
    /// to its next attempt with no failure counted.
    NeverRan,
}

impl AttemptEnd {
    /// The attempt's outcome.
    pub fn outcome(&self) -> AttemptOutcome {
        match self {
            Self::Succeeded(_) => AttemptOutcome::Succeeded,
            Self::Failed { .. } => AttemptOutcome::Failed,
            Self::Rejected { .. } => AttemptOutcome::Rejected,
            Self::Killed(_) => AttemptOutcome::Killed,
            Self::Abandoned(_) | Self::NeverRan => AttemptOutcome::Lost,
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
    if let Some(value) = result.value.as_mut() {
        without_nul(value);
    }
    result
}

/// Every NUL in `value`'s strings and keys as U+FFFD (a task's result is its own JSON).
fn without_nul(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(text) if text.contains('\0') => *text = text.replace('\0', "\u{FFFD}"),
        Value::Array(items) => items.iter_mut().for_each(without_nul),
        Value::Object(fields) if fields.keys().any(|k| k.contains('\0')) => {
            let taken = std::mem::take(fields);
            for (key, mut item) in taken {
                without_nul(&mut item);
                fields.insert(key.replace('\0', "\u{FFFD}"), item);
            }
        }
        Value::Object(fields) => fields.values_mut().for_each(without_nul),
        _ => {}
    }
}

/// What every recorded end of an attempt also writes, after a CTE `done` that moved its tasks
/// (`RETURNING id, attempt, job_id, status, worker_group, data_time, outcome, reason, exit_code,
/// error, result, at, started_at`): the attempt's row, the job's blocked triggers released, and
/// the events in one batched outbox row. `$9` is the worker's id, `$10` the events exchange,
/// `$11` the worker's name. Shared by [`finish_attempts`] and [`complete_instant_attempts`], so
/// an attempt's end means the same whichever way it came.
macro_rules! attempt_end_effects {
    () => {
        r#"
        ), attempt AS (
            -- The attempt's one row, written now; it exists already only if the attempt printed
            -- while it ran (attempt_output::record_running).
            INSERT INTO task_attempts AS a (task_id, attempt, worker_id, worker_name, started_at,
                                            outcome, finished_at, exit_code, error, output,
                                            value)
            SELECT id, attempt, $9, $11, coalesce(started_at, at), outcome, at, exit_code,
                   error, result->>'output', result->'value'
            FROM done
            ON CONFLICT (task_id, attempt) DO UPDATE SET
                outcome = excluded.outcome, finished_at = excluded.finished_at,
                exit_code = excluded.exit_code, error = excluded.error,
                output = coalesce(excluded.output, a.output), value = excluded.value
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
        "#
    };
}

/// The batch of delivered messages as a CTE `wanted`: the columns of [`MessageColumns`], bound
/// by [`MessageColumns::bind`] as `$1`–`$8`, and `$12` (the execute users).
macro_rules! wanted_messages {
    () => {
        r#"
        WITH wanted AS (
            SELECT * FROM UNNEST($1::uuid[], $2::int[], $3::text[], $4::text[], $5::jsonb[],
                                 $6::jsonb[], $7::bigint[], $8::bigint[], $12::text[])
                AS w(id, attempt, worker_group, kind, spec, data, data_time_us, timeout_ms,
                     execute_user)
        "#
    };
}

/// The rest of the condition under which an attempt of `wanted` (`w`) may leave `ready` for
/// worker `$9` (after the task's id, attempt and status): its task's row `t` records what the
/// message says, so a forged or stale message moves nothing, and the worker holds its lease.
/// The start and the instant completion share it, so both check the same.
macro_rules! message_matches_row_under_lease {
    () => {
        r#"
              AND t.worker_group = w.worker_group AND t.kind = w.kind AND t.spec = w.spec
              AND t.data = w.data AND t.timeout_ms IS NOT DISTINCT FROM w.timeout_ms
              AND t.execute_user IS NOT DISTINCT FROM w.execute_user
              AND t.data_time IS NOT DISTINCT FROM
                  timestamptz 'epoch' + w.data_time_us * interval '1 microsecond'
              -- a worker declared dead, or whose lease ran out, moves nothing until its
              -- heartbeat renews the lease
              AND EXISTS (SELECT 1 FROM workers k
                          WHERE k.id = $9 AND k.status IN ('online', 'draining')
                            AND coalesce(k.lease_expires_at, 'infinity') > now())
        "#
    };
}

/// `ready → running` for exactly these attempts, recording the worker (the attempt's own row is
/// written when it ends), in one statement. Each attempt is asked for by its message, as
/// delivered: it starts only if its task's row records the same attempt with the same group,
/// kind, spec, data, data time, timeout and execute user, so a forged or stale message that
/// differs in any of them starts nothing and leaves the attempt as it was (the caller dead-letters it). Returns, for each
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
    let c = MessageColumns::of(messages);
    let mut tx = begin_by_key(store, "starting attempts").await?;
    let started: Vec<MessageParts> = c
        .bind_to(sqlx::query_as(concat!(
            wanted_messages!(),
            r#"
        ), moved AS (
            UPDATE tasks t SET status = 'running', worker_id = $9, started_at = now()
            FROM wanted w
            -- The statuses come as parameters so that the plan cannot read the tasks through
            -- a status index: after a burst of submissions that walks every ready task on each
            -- start; by the primary key it reads only the batch's.
            WHERE t.id = ANY($1) AND t.id = w.id AND t.attempt = w.attempt AND t.status = $10
            "#,
            message_matches_row_under_lease!(),
            r#"
            RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                      t.timeout_ms, t.execute_user
        )
        -- The attempt's row is written when it ends (or first prints): a running attempt is
        -- the task's own row (status, worker_id, started_at), which saves a row version each.
        SELECT m.id, m.attempt, m.kind, m.spec, m.worker_group, m.data, m.data_time,
               m.timeout_ms, m.execute_user
        FROM moved m
        UNION ALL
        -- the statement's snapshot predates `moved`: these are starts committed earlier
        SELECT t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
               t.timeout_ms, t.execute_user
        FROM tasks t
        WHERE t.id = ANY($1) AND (t.id, t.attempt) IN (SELECT id, attempt FROM wanted)
          AND t.status = $11 AND t.worker_id = $9
        "#
        )))
        .bind(worker.id)
        .bind(TaskStatus::Ready.as_str())
        .bind(TaskStatus::Running.as_str())
        .bind(&c.users)
        .fetch_all(&mut *tx)
        .await
        .context("starting attempts")?;
    tx.commit().await.context("committing started attempts")?;
    Ok(started.iter().map(|p| p.message(p.attempt)).collect())
}

/// Task messages as the columns a statement compares them with, one array each.
struct MessageColumns<'a> {
    ids: Vec<Uuid>,
    attempts: Vec<i32>,
    groups: Vec<&'a str>,
    kinds: Vec<&'a str>,
    specs: Vec<Json<&'a serde_json::Value>>,
    datas: Vec<Json<&'a serde_json::Value>>,
    /// Microseconds since the epoch: PostgreSQL's precision, compared exactly.
    data_times: Vec<Option<i64>>,
    timeouts: Vec<Option<i64>>,
    users: Vec<Option<&'a str>>,
}

impl<'a> MessageColumns<'a> {
    /// Binds the columns to `query` as `$1`–`$8` of a `wanted_messages!` statement (the execute users,
    /// `$12`, are bound in their turn).
    fn bind_to<'q, O>(
        &'q self,
        query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
        query
            .bind(&self.ids)
            .bind(&self.attempts)
            .bind(&self.groups)
            .bind(&self.kinds)
            .bind(&self.specs)
            .bind(&self.datas)
            .bind(&self.data_times)
            .bind(&self.timeouts)
    }

    fn of(messages: &'a [TaskMessage]) -> Self {
        Self {
            ids: messages.iter().map(|m| m.task_id).collect(),
            attempts: messages.iter().map(|m| m.attempt).collect(),
            groups: messages.iter().map(|m| m.group.as_str()).collect(),
            kinds: messages.iter().map(|m| m.kind.as_str()).collect(),
            specs: messages.iter().map(|m| Json(&m.spec)).collect(),
            datas: messages.iter().map(|m| Json(&m.data)).collect(),
            data_times: messages
                .iter()
                .map(|m| m.data_time.map(|t| t.as_microsecond()))
                .collect(),
            timeouts: messages.iter().map(|m| m.timeout_ms).collect(),
            users: messages.iter().map(|m| m.execute_user.as_deref()).collect(),
        }
    }
}

/// `ready → succeeded` for attempts with nothing to run ([`crate::model::runs_instantly`]: a
/// noop without a sleep), in one statement that is their start and their end: the same check of
/// each message against its task's row and of this worker's lease as [`start_attempts`] makes,
/// then the same attempt row, released triggers and event as [`finish_attempts`] writes. Such an
/// attempt is never `running`: nothing could happen while it ran (no process, no output, no
/// timeout, nothing to kill), and skipping that state saves a row version and a statement each.
///
/// Returns the `(task, attempt)` pairs that succeeded. An attempt missing from it was not ready
/// (a duplicate or stale delivery, a killed task, a completion that committed unheard) or its
/// message differs from its row, which the caller tells apart ([`recorded_attempt`]), as after a
/// start.
pub async fn complete_instant_attempts(
    store: &Store,
    topology: &Topology,
    worker: &WorkerIdentity,
    messages: &[TaskMessage],
) -> Result<Vec<((Uuid, i32), TaskStatus)>, StoreError> {
    let c = MessageColumns::of(messages);
    let mut tx = begin_by_key(store, "completing instant attempts").await?;
    let moved: Vec<(Uuid, i32, String)> = c
        .bind_to(sqlx::query_as(concat!(
            wanted_messages!(),
            r#"
        ), done AS (
            UPDATE tasks t SET status = 'succeeded', worker_id = $9, started_at = now(),
                               finished_at = now(), next_attempt_at = NULL, reason = NULL,
                               result = $14
            FROM wanted w
            -- as in the start statement: by primary key, the status a parameter
            WHERE t.id = ANY($1) AND t.id = w.id AND t.attempt = w.attempt AND t.status = $13
            "#,
            message_matches_row_under_lease!(),
            r#"
            RETURNING t.id, t.attempt, t.job_id, t.status, t.worker_group, t.data_time,
                      'succeeded'::text AS outcome, t.reason, NULL::int AS exit_code,
                      NULL::text AS error, t.result, now() AS at, t.started_at
        "#,
            attempt_end_effects!()
        )))
        .bind(worker.id)
        .bind(topology.events_exchange())
        .bind(&worker.name)
        .bind(&c.users)
        .bind(TaskStatus::Ready.as_str())
        .bind(Json(TaskResult::default()))
        .fetch_all(&mut *tx)
        .await
        .context("completing instant attempts")?;
    tx.commit()
        .await
        .context("committing completed instant attempts")?;
    store.outbox_written();
    moved
        .into_iter()
        .map(|(id, attempt, status)| {
            Ok(((id, attempt), crate::store::tasks::decode_status(&status)?))
        })
        .collect()
}

/// Publishes the message of a `ready` attempt again, from its row, if the task is still at that
/// attempt and `ready`: for a worker that dropped a delivery of the attempt as a duplicate of a
/// message that turned out forged, or that gives back a task it took from its submission
/// ([`super::submit_routed_taking`]), which is then no longer taken. A copy too many is harmless
/// (one start wins).
pub async fn republish_ready_attempt(
    store: &Store,
    topology: &Topology,
    task_id: Uuid,
    attempt: i32,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let parts: Option<MessageParts> = sqlx::query_as(
        "UPDATE tasks SET worker_id = NULL, republished_at = now()
         WHERE id = $1 AND attempt = $2 AND status = 'ready'
         RETURNING id, attempt, kind, spec, worker_group, data, data_time, timeout_ms,
                   execute_user",
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
    commit(store, tx, "committing a republished attempt").await?;
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
    // An abandoned attempt, or one never run, is a lost one (release_attempts), not an end this
    // statement records.
    let finished: Vec<&FinishedAttempt> = finished
        .iter()
        .filter(|f| !matches!(f.end, AttemptEnd::Abandoned(_) | AttemptEnd::NeverRan))
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
            // Filtered out above.
            AttemptEnd::Abandoned(result) => (Some("interrupted"), result.clone(), None),
            AttemptEnd::NeverRan => (Some("interrupted"), TaskResult::default(), None),
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
    let mut tx = begin_by_key(store, "finishing attempts").await?;
    let moved: Vec<(Uuid, i32, String)> = sqlx::query_as(concat!(
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
            -- the status as a parameter, so that the plan cannot use a status index
            WHERE t.id = ANY($1) AND t.id = e.id AND t.attempt = e.attempt
              AND t.status = $12 AND t.worker_id = $9
            RETURNING t.id, t.attempt, t.job_id, t.status, t.worker_group, t.data_time, e.outcome,
                      t.reason, e.exit_code, e.error, e.result, now() AS at, t.started_at
        "#,
        attempt_end_effects!()
    ))
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
    .bind(&worker.name)
    .bind(TaskStatus::Running.as_str())
    .fetch_all(&mut *tx)
    .await
    .context("finishing attempts")?;
    tx.commit().await.context("committing finished attempts")?;
    store.outbox_written();
    moved
        .into_iter()
        .map(|(id, attempt, status)| {
            Ok(((id, attempt), crate::store::tasks::decode_status(&status)?))
        })
        .collect()
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
    enqueue_current_attempts(&mut tx, topology, &released).await?;
    commit(store, tx, "committing released retries").await?;
    Ok(released.len())
}

/// A transaction for the batched start and end statements, which read their batch's tasks by
/// primary key (their statuses come as parameters, so no status index can match): one generic
/// plan per connection, made at its first use and kept. Left to choose, PostgreSQL planned every
/// start afresh (half a millisecond each, a third of the statement's cost with small batches),
/// and the end walked the running tasks' index, or every live task's behind a backlog of ready
/// ones (0.6 ms a statement during single `POST /api/v1/tasks` requests, against 0.1 ms by key).
/// Sequential scans are off because a new installation's statistics say `tasks` is empty, which
/// would otherwise make one the plan for good.
async fn begin_by_key(
    store: &Store,
    context: &'static str,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
    store
        .pool()
        .begin_with(
            "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; \
             SET LOCAL enable_seqscan = off",
        )
        .await
        .context(context)
}
