//! Each attempt's output tail: written by the worker while the attempt runs (so it can be
//! followed), and for the last time by the transition that ends the attempt
//! ([`super::task_lifecycle`]). Output is a view on an attempt, not a state: writing it moves
//! nothing, and a write that arrives after the attempt ended changes nothing.

use serde::Serialize;
use uuid::Uuid;

use crate::model::TaskStatus;

use super::{Context, Store, StoreError};

/// What one attempt has printed so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptOutput {
    /// The attempt (1 for the first).
    pub attempt: i32,
    /// The tail of stdout and stderr, interleaved; empty before anything was written.
    pub output: String,
    /// Whether the attempt is still running (more output may come).
    pub running: bool,
    /// How many bytes it had printed in all when `output` was written while it ran (None once
    /// its end wrote the final output, or before anything was written).
    pub bytes: Option<i64>,
}

/// Records the output of a running attempt. Does nothing once the attempt has ended: its final
/// output came with its end.
pub async fn record_running(
    store: &Store,
    task_id: Uuid,
    attempt: i32,
    output: &str,
    bytes: u64,
) -> Result<(), StoreError> {
    // The attempt's row is written at its first output (or at its end, whichever comes first).
    sqlx::query(
        "INSERT INTO task_attempts AS a (task_id, attempt, worker_id, worker_name, started_at,
                                         output, output_bytes)
         SELECT t.id, t.attempt, t.worker_id, w.name, coalesce(t.started_at, now()), $3, $4
         FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id
         WHERE t.id = $1 AND t.attempt = $2 AND t.status = 'running'
         ON CONFLICT (task_id, attempt) DO UPDATE
             SET output = excluded.output, output_bytes = excluded.output_bytes
             WHERE a.finished_at IS NULL",
    )
    .bind(task_id)
    .bind(attempt)
    .bind(output)
    .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
    .execute(store.pool())
    .await
    .context("recording a running attempt's output")?;
    Ok(())
}

/// The output of `attempt` of a task, or of its latest attempt, with the task's status (whether
/// more may come). None when the task has no such attempt yet; [`StoreError::TaskNotFound`] when
/// there is no such task.
pub async fn read(
    store: &Store,
    task_id: Uuid,
    attempt: Option<i32>,
) -> Result<(TaskStatus, Option<AttemptOutput>), StoreError> {
    // (task status, attempt, output, running); the attempt's columns are null without one. A
    // running attempt that has printed nothing yet has no row of its own: the task's row is it.
    type Row = (
        String,
        Option<i32>,
        Option<String>,
        Option<bool>,
        Option<i64>,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT t.status, coalesce(a.attempt, r.attempt), a.output,
                CASE WHEN a.attempt IS NOT NULL THEN a.finished_at IS NULL
                     ELSE r.attempt IS NOT NULL END,
                CASE WHEN a.finished_at IS NULL THEN a.output_bytes END
         FROM tasks t
         -- the attempt asked for, or the latest with a row; not an earlier one while the
         -- task runs a later attempt that has no row yet
         LEFT JOIN LATERAL (
             SELECT attempt, output, finished_at, output_bytes FROM task_attempts
             WHERE task_id = t.id AND ($2::int IS NULL OR attempt = $2)
             ORDER BY attempt DESC LIMIT 1
         ) a ON $2::int IS NOT NULL OR a.attempt >= t.attempt OR t.status <> 'running'
         -- else the running attempt, as the task's row records it
         LEFT JOIN LATERAL (
             SELECT t.attempt WHERE t.status = 'running' AND ($2::int IS NULL OR t.attempt = $2)
         ) r ON a.attempt IS NULL
         WHERE t.id = $1",
    )
    .bind(task_id)
    .bind(attempt)
    .fetch_optional(store.pool())
    .await
    .context("reading an attempt's output")?;
    let Some((status, attempt, output, running, bytes)) = row else {
        return Err(StoreError::TaskNotFound(task_id));
    };
    let status = super::tasks::decode_status(&status)?;
    let output = attempt.map(|attempt| AttemptOutput {
        attempt,
        output: output.unwrap_or_default(),
        running: running.unwrap_or(false),
        bytes,
    });
    Ok((status, output))
}
