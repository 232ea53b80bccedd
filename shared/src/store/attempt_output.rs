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
    sqlx::query(
        "UPDATE task_attempts SET output = $3, output_bytes = $4
         WHERE task_id = $1 AND attempt = $2 AND finished_at IS NULL",
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
    // (task status, attempt, output, running); the attempt's columns are null without one
    type Row = (
        String,
        Option<i32>,
        Option<String>,
        Option<bool>,
        Option<i64>,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT t.status, a.attempt, a.output, a.finished_at IS NULL,
                CASE WHEN a.finished_at IS NULL THEN a.output_bytes END
         FROM tasks t
         LEFT JOIN LATERAL (
             SELECT attempt, output, finished_at, output_bytes FROM task_attempts
             WHERE task_id = t.id AND ($2::int IS NULL OR attempt = $2)
             ORDER BY attempt DESC LIMIT 1
         ) a ON true
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
