//! History that does not grow for ever: ended tasks (with their attempts, by cascade) and
//! fired-trigger rows older than the retention period are removed in small batches.
//!
//! What is never touched: a task that has not ended; an ended task whose job is an upstream of a
//! job with a waiting task (the waiting task may still need it to be met); a fired-trigger row
//! that is `blocked` or whose task still lives. Each batch is its own short transaction under a
//! transaction-level advisory lock, so one instance prunes at a time and no lock outlives a batch.
//! Tasks are found by their UUIDv7 ids (time-ordered) on the primary key, so pruning needs no
//! index of its own that every task write would pay for.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Context, Store, StoreError};

/// Rows removed per transaction.
pub const BATCH: i64 = 1000;
/// The advisory lock that makes one instance prune at a time.
const PRUNE_LOCK: i64 = 0x6368_696d_6570_726e; // "chimeprn"

/// What a prune removed (or, dry, would remove).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PruneReport {
    /// Ended tasks (their attempts went with them).
    pub tasks: i64,
    /// Fired-trigger rows.
    pub fired_triggers: i64,
    /// Whether another instance was pruning (this one stopped).
    pub busy: bool,
}

/// The smallest UUIDv7 of `t`'s millisecond: every task created before `t` has a smaller id.
pub(crate) fn first_id_at(t: Timestamp) -> Uuid {
    let ms = u64::try_from(t.as_millisecond()).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(ms, &[0; 10]).into_uuid()
}

const ENDED_TASKS: &str = "
    SELECT t.id FROM tasks t
    WHERE t.id < $1 AND t.status IN ('succeeded', 'failed', 'killed')
      AND NOT EXISTS (
          SELECT 1 FROM job_dependencies d
          JOIN tasks w ON w.job_id = d.job_id AND w.status = 'waiting'
          WHERE d.depends_on_job_id = t.job_id)
    ORDER BY t.id LIMIT $2";

const OLD_FIRES: &str = "
    SELECT f.id FROM fired_triggers f
    WHERE f.fired_time < $1 AND f.state <> 'blocked'
      AND NOT EXISTS (
          SELECT 1 FROM tasks t WHERE t.id = f.task_id
            AND t.status IN ('waiting', 'ready', 'running', 'retrying'))
    ORDER BY f.id LIMIT $2";

/// Removes what ended before `cut`, a batch at a time; with `dry_run`, counts it instead.
pub async fn prune(
    store: &Store,
    cut: Timestamp,
    dry_run: bool,
) -> Result<PruneReport, StoreError> {
    let mut report = PruneReport::default();
    let first_kept = first_id_at(cut);
    if dry_run {
        let (tasks, fires): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT (SELECT count(*) FROM ({}) x), (SELECT count(*) FROM ({}) y)",
            ENDED_TASKS.replace("LIMIT $2", ""),
            OLD_FIRES.replace("$1", "$3").replace("LIMIT $2", "")
        )))
        .bind(first_kept)
        .bind(0_i64)
        .bind(jiff_sqlx::Timestamp::from(cut))
        .fetch_one(store.pool())
        .await
        .context("counting what a prune would remove")?;
        report.tasks = tasks;
        report.fired_triggers = fires;
        return Ok(report);
    }
    loop {
        let mut tx = store.begin().await?;
        let ours: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(PRUNE_LOCK)
            .fetch_one(&mut *tx)
            .await
            .context("taking the prune lock")?;
        if !ours {
            report.busy = true;
            return Ok(report);
        }
        let tasks = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM tasks WHERE id IN ({ENDED_TASKS} FOR UPDATE OF t SKIP LOCKED)"
        )))
        .bind(first_kept)
        .bind(BATCH)
        .execute(&mut *tx)
        .await
        .context("pruning ended tasks")?
        .rows_affected();
        let fires = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM fired_triggers WHERE id IN ({OLD_FIRES} FOR UPDATE OF f SKIP LOCKED)"
        )))
        .bind(jiff_sqlx::Timestamp::from(cut))
        .bind(BATCH)
        .execute(&mut *tx)
        .await
        .context("pruning fired-trigger rows")?
        .rows_affected();
        tx.commit().await.context("committing a prune batch")?;
        let (tasks, fires) = (
            i64::try_from(tasks).unwrap_or(i64::MAX),
            i64::try_from(fires).unwrap_or(i64::MAX),
        );
        report.tasks += tasks;
        report.fired_triggers += fires;
        metrics::counter!("chime_pruned_tasks_total").increment(tasks.unsigned_abs());
        if tasks < BATCH && fires < BATCH {
            return Ok(report);
        }
    }
}
