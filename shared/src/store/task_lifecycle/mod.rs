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
//!   rerun: failed | killed | succeeded → ready (next attempt); its upstream_failed descendants
//!          (--downstream: every ended one) → waiting
//!   worker gone, or its shutdown cut the attempt short:
//!                running → ready (requests_recovery) | retrying | failed (lost) | killed
//!   nothing to run (a noop without a sleep): ready → succeeded in one statement, never running
//!   a start the worker never heard of: running → ready (next attempt)
//!   ready, message lost on the bus: the same attempt's message published again
//!   submitted over AMQP and taken by the worker that recorded it: ready under that worker with
//!   no message until it starts it; given back, that worker gone, or 10 s passed: its message
//!   published
//! ```
//!
//! Every transition is one statement or one transaction, fenced by `(task, attempt)` where a
//! worker is involved: a worker that holds a stale attempt, or a duplicate delivery, moves
//! nothing. Every transition that others must hear about writes its bus message (task message,
//! event, kill command) to the outbox in the same transaction, so a message exists iff the change
//! committed.
//!
//! The transitions are split by phase: [`creation`] (submit, fires, job run), [`attempts`] (a
//! worker's start and end of an attempt, retries), [`recovery`] (dead workers, lost messages),
//! [`operator`] (kill, rerun) and [`downstream`] (dependencies and backfills).

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
                reason = CASE WHEN c.before = 'running' THEN t.reason ELSE 'killed' END,
                -- a task taken at submission is ready under its worker until it starts
                worker_id = CASE WHEN c.before = 'ready' THEN NULL ELSE t.worker_id END
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
/// one statement. Written once here (before the submodules, which use it); `kill` picks one task,
/// `kill_job_tasks` a job's, `kill_backfill` a backfill's.
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

mod attempts;
mod creation;
mod downstream;
mod operator;
mod recovery;

pub use attempts::{
    AttemptEnd, FinishedAttempt, complete_instant_attempts, finish_attempts, recorded_attempt,
    release_due_retries, republish_ready_attempt, start_attempts,
};
pub use creation::{
    Shown, TriggerFire, record_trigger_fires, route_submissions, run_job_now, submit, submit_many,
    submit_routed, submit_routed_shown, submit_routed_taking,
};
pub use downstream::{
    Advanced, DependencyOutcome, advance_dependent, create_backfill, kill_backfill,
    promote_backfill, record_blocked,
};
pub use operator::{
    BulkOutcome, JobTasks, KillOutcome, MayRunAs, kill, kill_job_tasks, rerun, rerun_job_tasks,
};
pub use recovery::{
    LostScope, Release, StaleQueue, publish_unstarted_taken, queues_with_stale_ready,
    recover_lost_attempts, release_attempts, republish_stale_ready,
};

use sqlx::types::Json;
use uuid::Uuid;

use super::{Context, Store, StoreError};
use crate::bus::Topology;
use crate::model::{MESSAGE_VERSION, TaskMessage};

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

/// Commits a transition that wrote outbox rows, then wakes this process's relay to publish them
/// now (a relay that does not LISTEN would otherwise find them at its next poll).
async fn commit(
    store: &Store,
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    context: &'static str,
) -> Result<(), StoreError> {
    tx.commit().await.context(context)?;
    store.outbox_written();
    Ok(())
}

/// Writes the message of each row's current attempt to the outbox ([`enqueue_task_messages`]).
async fn enqueue_current_attempts(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    rows: &[MessageParts],
) -> Result<(), StoreError> {
    let messages: Vec<TaskMessage> = rows.iter().map(|t| t.message(t.attempt)).collect();
    enqueue_task_messages(tx, topology, &messages).await
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
