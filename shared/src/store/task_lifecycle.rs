//! The one place a task's status moves.
//!
//! ```text
//!   trigger fire / dependency met / submit
//!              │
//!   waiting ───┴──▶ ready ──worker takes attempt n──▶ running ──▶ succeeded
//!                     ▲                                  │  ├──▶ failed   (no budget left)
//!                     │                                  │  └──▶ killed
//!                     └───── retrying ◀──────────────────┘  (rejected or failed, budget left)
//! ```
//!
//! Every transition is one statement (so one commit) fenced by `(task, attempt)`: a worker that
//! holds a stale attempt, or a duplicate delivery, moves nothing. Every transition that others must
//! hear about writes its bus message to the outbox in the same statement, so a message exists iff
//! the change committed.

use serde_json::json;
use sqlx::types::Json;
use uuid::Uuid;

use super::{Context, Store, StoreError};
use crate::bus::Topology;
use crate::model::{
    AttemptOutcome, MESSAGE_VERSION, NewTask, TaskEvent, TaskMessage, TaskResult, TaskStatus,
    kinds::BUILTIN_KINDS,
};

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
    /// It ran and failed; `reason` is a short word (failed, timeout, error).
    Failed {
        /// What it produced.
        result: TaskResult,
        /// Why, in one word.
        reason: &'static str,
    },
    /// The worker could not take it.
    Rejected {
        /// Why.
        error: String,
    },
}

/// An attempt's end, fenced by the attempt and the worker that ran it.
#[derive(Debug, Clone)]
pub struct FinishedAttempt<'a> {
    /// The task message the attempt ran.
    pub message: &'a TaskMessage,
    /// The worker.
    pub worker: &'a WorkerIdentity,
    /// How it ended.
    pub end: AttemptEnd,
}

/// Creates a `ready` ad-hoc task and its task message, in one statement.
///
/// The group defaults to the kind's route, else `default`. A kind that is neither built in nor
/// routed is refused. With a client-chosen id that exists already, nothing is written.
pub async fn submit(
    store: &Store,
    topology: &Topology,
    task: NewTask,
) -> Result<Submitted, StoreError> {
    let builtin = BUILTIN_KINDS.contains(&task.kind.as_str());
    let group = match (&task.group, builtin) {
        (Some(group), true) => group.clone(),
        _ => {
            let route: Option<String> =
                sqlx::query_scalar("SELECT worker_group FROM job_kind_routes WHERE kind = $1")
                    .bind(&task.kind)
                    .fetch_optional(store.pool())
                    .await
                    .context("looking up the kind's route")?;
            match (route, &task.group, builtin) {
                (None, _, false) => return Err(StoreError::UnknownKind(task.kind)),
                (_, Some(group), _) => group.clone(),
                (Some(route), None, _) => route,
                (None, None, true) => "default".to_string(),
            }
        }
    };
    let id = task.id.unwrap_or_else(Uuid::now_v7);
    let spec = if task.spec.is_null() {
        json!({})
    } else {
        task.spec
    };
    let data = if task.data.is_null() {
        json!({})
    } else {
        task.data
    };
    let message = TaskMessage {
        v: MESSAGE_VERSION,
        task_id: id,
        attempt: 1,
        kind: task.kind,
        group,
        spec,
        data,
        data_time: task.data_time,
        timeout_ms: task.timeout_ms,
        execute_user: task.execute_user,
    };
    let backoff = serde_json::to_value(task.backoff.unwrap_or_default())
        .unwrap_or_else(|_| json!({"kind": "fixed"}));
    let inserted: Option<Uuid> = sqlx::query_scalar(
        r#"
        WITH task AS (
            INSERT INTO tasks (id, kind, spec, worker_group, priority, status, attempt,
                               reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user, ready_at)
            VALUES ($1, $2, $3, $4, $5, 'ready', 1, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                    $15, $16, now())
            ON CONFLICT (id) DO NOTHING
            RETURNING id
        ), message AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $17, $4, $18 FROM task
        )
        SELECT id FROM task
        "#,
    )
    .bind(id)
    .bind(&message.kind)
    .bind(Json(&message.spec))
    .bind(&message.group)
    .bind(task.priority.unwrap_or(5))
    .bind(task.reject_retries.unwrap_or(0))
    .bind(task.reject_interval_ms.unwrap_or(3000))
    .bind(task.failed_retries.unwrap_or(0))
    .bind(task.failed_interval_ms.unwrap_or(3000))
    .bind(Json(backoff))
    .bind(message.timeout_ms)
    .bind(task.requests_recovery.unwrap_or(false))
    .bind(message.data_time.map(jiff_sqlx::Timestamp::from))
    .bind(Json(&message.data))
    .bind(&task.submit_user)
    .bind(&message.execute_user)
    .bind(topology.tasks_exchange())
    .bind(Json(&message))
    .fetch_optional(store.pool())
    .await
    .context("inserting the task")?;
    Ok(Submitted {
        id,
        created: inserted.is_some(),
    })
}

/// `ready → running` for exactly this attempt, recording the worker and opening the attempt's row.
///
/// Returns false when nothing moved: a duplicate or stale delivery, or a killed task. The caller
/// acks and drops the message.
pub async fn start_attempt(
    store: &Store,
    task_id: Uuid,
    attempt: i32,
    worker: &WorkerIdentity,
) -> Result<bool, StoreError> {
    let started: Option<Uuid> = sqlx::query_scalar(
        r#"
        WITH moved AS (
            UPDATE tasks SET status = 'running', worker_id = $3, started_at = now()
            WHERE id = $1 AND attempt = $2 AND status = 'ready'
            RETURNING id, attempt, started_at
        )
        INSERT INTO task_attempts (task_id, attempt, worker_id, worker_name, started_at)
        SELECT id, attempt, $3, $4, started_at FROM moved
        RETURNING task_id
        "#,
    )
    .bind(task_id)
    .bind(attempt)
    .bind(worker.id)
    .bind(&worker.name)
    .fetch_optional(store.pool())
    .await
    .context("starting the attempt")?;
    Ok(started.is_some())
}

/// `running → succeeded | failed` for the attempt this worker runs, closing the attempt's row and
/// writing the task's event to the outbox.
///
/// Returns false when the attempt is no longer this worker's (killed, or recovered elsewhere).
pub async fn finish_attempt(
    store: &Store,
    topology: &Topology,
    finished: FinishedAttempt<'_>,
) -> Result<bool, StoreError> {
    let message = finished.message;
    let (status, outcome, reason, result) = match finished.end {
        AttemptEnd::Succeeded(result) => (
            TaskStatus::Succeeded,
            AttemptOutcome::Succeeded,
            None,
            result,
        ),
        AttemptEnd::Failed { result, reason } => (
            TaskStatus::Failed,
            AttemptOutcome::Failed,
            Some(reason),
            result,
        ),
        AttemptEnd::Rejected { error } => (
            TaskStatus::Failed,
            AttemptOutcome::Rejected,
            Some("rejected"),
            TaskResult {
                error: Some(error),
                ..TaskResult::default()
            },
        ),
    };
    let event = TaskEvent {
        v: MESSAGE_VERSION,
        task_id: message.task_id,
        attempt: message.attempt,
        status,
        group: message.group.clone(),
        job_id: None,
        data_time: message.data_time,
        reason: reason.map(str::to_owned),
        // replaced by the database's finish time below
        at: jiff::Timestamp::UNIX_EPOCH,
    };
    let moved: Option<Uuid> = sqlx::query_scalar(
        r#"
        WITH done AS (
            UPDATE tasks SET status = $4, finished_at = now(), reason = $5, result = $6
            WHERE id = $1 AND attempt = $2 AND status = 'running' AND worker_id = $3
            RETURNING id, attempt, job_id, finished_at
        ), attempt AS (
            UPDATE task_attempts a
            SET outcome = $7, finished_at = done.finished_at, exit_code = $8, error = $9
            FROM done
            WHERE a.task_id = done.id AND a.attempt = done.attempt
        ), unblocked AS (
            -- a job that allows one task at a time may fire again
            UPDATE triggers SET state = 'waiting'
            FROM done WHERE triggers.job_id = done.job_id AND triggers.state = 'blocked'
        ), event AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $10, $11,
                   jsonb_set(jsonb_set($12::jsonb, '{at}', to_jsonb(done.finished_at)),
                             '{job_id}', coalesce(to_jsonb(done.job_id), 'null'))
            FROM done
        )
        SELECT id FROM done
        "#,
    )
    .bind(message.task_id)
    .bind(message.attempt)
    .bind(finished.worker.id)
    .bind(status.as_str())
    .bind(reason)
    .bind(Json(&result))
    .bind(outcome.as_str())
    .bind(result.exit_code)
    .bind(&result.error)
    .bind(topology.events_exchange())
    .bind(event.routing_key())
    .bind(Json(&event))
    .fetch_optional(store.pool())
    .await
    .context("finishing the attempt")?;
    Ok(moved.is_some())
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

/// `(nothing) → ready` for a batch of trigger fires, in the caller's transaction: one
/// fired_triggers row, one task (copying its job's settings) and one outbox row released at the
/// fire time, per fire. A (trigger, scheduled time) that fired already makes nothing: the unique
/// key is the exactly-once guarantee. Returns how many fires were new.
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
    let priorities: Vec<i32> = fires.iter().map(|f| f.priority).collect();
    let data: Vec<Json<&serde_json::Value>> = fires.iter().map(|f| Json(&f.message.data)).collect();
    let groups: Vec<&str> = fires.iter().map(|f| f.message.group.as_str()).collect();
    let bodies: Vec<Json<&TaskMessage>> = fires.iter().map(|f| Json(&f.message)).collect();
    let created: i64 = sqlx::query_scalar(
        r#"
        WITH fire AS (
            SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[], $4::timestamptz[],
                                 $5::int[], $6::jsonb[], $7::text[], $8::jsonb[])
                AS f(task_id, trigger_id, job_id, sched_time, priority, data, worker_group, body)
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
            SELECT f.task_id, j.id, f.trigger_id, j.kind, j.spec, f.worker_group, f.priority,
                   'ready', 1, j.reject_retries, j.reject_interval_ms, j.failed_retries,
                   j.failed_interval_ms, j.backoff, j.timeout_ms, j.requests_recovery,
                   f.sched_time, f.data, j.submit_user, j.execute_user, f.sched_time
            FROM fire f JOIN fired USING (task_id) JOIN jobs j ON j.id = f.job_id
            RETURNING id
        ), message AS (
            INSERT INTO outbox (exchange, routing_key, body, publish_at)
            SELECT $10, f.worker_group, f.body, f.sched_time
            FROM fire f JOIN task ON task.id = f.task_id
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
    .fetch_one(tx)
    .await
    .context("recording trigger fires")?;
    Ok(created as u64)
}

/// `(nothing) → ready` for a job run on demand (`chime job run`): a task with the job's settings,
/// its data overlaid with `data`, for `data_time` (default now), published at once.
pub async fn run_job_now(
    store: &Store,
    topology: &Topology,
    group: &str,
    name: &str,
    data: serde_json::Value,
    data_time: Option<jiff::Timestamp>,
) -> Result<Uuid, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Job {
        id: i64,
        kind: String,
        spec: Json<serde_json::Value>,
        worker_group: String,
        data: Json<serde_json::Value>,
        timeout_ms: Option<i64>,
        execute_user: Option<String>,
        now: jiff_sqlx::Timestamp,
    }
    let job: Option<Job> = sqlx::query_as(
        "SELECT id, kind, spec, worker_group, data, timeout_ms, execute_user, now() AS now
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
        data_time: Some(data_time.unwrap_or(job.now.to_jiff())),
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
            SELECT $1, j.id, j.kind, j.spec, j.worker_group, j.priority, 'ready', 1,
                   j.reject_retries, j.reject_interval_ms, j.failed_retries, j.failed_interval_ms,
                   j.backoff, j.timeout_ms, j.requests_recovery, $3, $4, j.submit_user,
                   j.execute_user, now()
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
    let mut tx = store
        .pool()
        .begin()
        .await
        .context("starting a transaction")?;
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

/// `running → ready (next attempt) | retrying | failed` for attempts whose worker is gone (offline,
/// or no heartbeat for `stale_after`): the attempt is closed as `lost`; a job that requests
/// recovery runs again as the next attempt, otherwise the failed budget decides. One instance at
/// a time (advisory lock); returns how many attempts were recovered. A worker presumed dead that
/// comes back finds its attempt fenced off: every worker write names (task, attempt, worker).
pub async fn recover_lost_attempts(
    store: &Store,
    topology: &Topology,
    stale_after: std::time::Duration,
    limit: i64,
) -> Result<usize, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Lost {
        #[sqlx(flatten)]
        parts: MessageParts,
        requests_recovery: bool,
        failures: i32,
        failed_retries: i32,
        job_id: Option<i64>,
    }
    let mut tx = store
        .pool()
        .begin()
        .await
        .context("starting a transaction")?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(RECOVERY_LOCK)
        .fetch_one(&mut *tx)
        .await
        .context("taking the recovery lock")?;
    if !locked {
        return Ok(0);
    }
    let lost: Vec<Lost> = sqlx::query_as(
        r#"
        SELECT t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
               t.timeout_ms, t.execute_user, t.requests_recovery, t.failures, t.failed_retries,
               t.job_id
        FROM tasks t JOIN workers w ON w.id = t.worker_id
        WHERE t.status = 'running'
          AND (w.status = 'offline' OR w.last_heartbeat < now() - make_interval(secs => $1))
        ORDER BY t.started_at
        LIMIT $2
        FOR UPDATE OF t SKIP LOCKED
        "#,
    )
    .bind(stale_after.as_secs_f64())
    .bind(limit)
    .fetch_all(&mut *tx)
    .await
    .context("finding lost attempts")?;
    if lost.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = lost.iter().map(|l| l.parts.id).collect();
    let attempts: Vec<i32> = lost.iter().map(|l| l.parts.attempt).collect();
    sqlx::query(
        "UPDATE task_attempts a SET outcome = 'lost', finished_at = now(),
                error = 'its worker stopped responding'
         FROM UNNEST($1::uuid[], $2::int[]) AS u(task_id, attempt)
         WHERE a.task_id = u.task_id AND a.attempt = u.attempt",
    )
    .bind(&ids)
    .bind(&attempts)
    .execute(&mut *tx)
    .await
    .context("closing lost attempts")?;
    let (rerun, rest): (Vec<&Lost>, Vec<&Lost>) = lost.iter().partition(|l| l.requests_recovery);
    let (retry, fail): (Vec<&Lost>, Vec<&Lost>) = rest
        .into_iter()
        .partition(|l| l.failures < l.failed_retries);
    if !rerun.is_empty() {
        let ids: Vec<Uuid> = rerun.iter().map(|l| l.parts.id).collect();
        sqlx::query(
            "UPDATE tasks SET status = 'ready', attempt = attempt + 1, worker_id = NULL,
                    started_at = NULL, ready_at = now() WHERE id = ANY($1)",
        )
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .context("re-running recovered tasks")?;
        let messages: Vec<TaskMessage> = rerun
            .iter()
            .map(|l| l.parts.message(l.parts.attempt + 1))
            .collect();
        enqueue_task_messages(&mut tx, topology, &messages).await?;
    }
    if !retry.is_empty() {
        let ids: Vec<Uuid> = retry.iter().map(|l| l.parts.id).collect();
        sqlx::query(
            "UPDATE tasks SET status = 'retrying', failures = failures + 1, worker_id = NULL,
                    next_attempt_at = now() + make_interval(secs => failed_interval_ms / 1000.0)
             WHERE id = ANY($1)",
        )
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .context("retrying lost attempts")?;
    }
    if !fail.is_empty() {
        let ids: Vec<Uuid> = fail.iter().map(|l| l.parts.id).collect();
        let job_ids: Vec<i64> = fail.iter().filter_map(|l| l.job_id).collect();
        let events: Vec<TaskEvent> = fail
            .iter()
            .map(|l| TaskEvent {
                v: MESSAGE_VERSION,
                task_id: l.parts.id,
                attempt: l.parts.attempt,
                status: TaskStatus::Failed,
                group: l.parts.worker_group.clone(),
                job_id: l.job_id,
                data_time: l.parts.data_time.map(|t| t.to_jiff()),
                reason: Some("lost".into()),
                at: jiff::Timestamp::now(),
            })
            .collect();
        let keys: Vec<String> = events.iter().map(TaskEvent::routing_key).collect();
        let bodies: Vec<Json<&TaskEvent>> = events.iter().map(Json).collect();
        sqlx::query(
            r#"
            WITH failed AS (
                UPDATE tasks SET status = 'failed', failures = failures + 1, finished_at = now(),
                       reason = 'lost', worker_id = NULL,
                       result = '{"error": "its worker stopped responding", "output": ""}'
                WHERE id = ANY($1)
            ), unblocked AS (
                UPDATE triggers SET state = 'waiting'
                WHERE job_id = ANY($2) AND state = 'blocked'
            )
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $3, k, e FROM UNNEST($4::text[], $5::jsonb[]) AS u(k, e)
            "#,
        )
        .bind(&ids)
        .bind(&job_ids)
        .bind(topology.events_exchange())
        .bind(&keys)
        .bind(&bodies)
        .execute(&mut *tx)
        .await
        .context("failing lost attempts")?;
    }
    tx.commit().await.context("committing recovery")?;
    Ok(lost.len())
}
