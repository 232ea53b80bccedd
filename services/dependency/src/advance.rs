//! Where a task event advances downstream jobs.
//!
//! ```text
//!   task.succeeded|failed|killed of job U for data time d
//!     ├─ U's backfill (if the task is in one): promote its next tasks
//!     └─ for each job J depending on U, J's data time D (d, or d's period for `period`):
//!          evaluate (J, D) ── ready ───────▶ J's waiting task → ready (or created)
//!                          ├─ failed (fail) ▶ J's waiting task → failed, upstream_failed
//!                          ├─ waiting on a failed upstream (wait) ▶ J's waiting task made if
//!                          │                    J has no trigger to make it
//!                          └─ waiting ─────▶ nothing yet
//!   task.waiting of job J for D (its trigger fired): evaluate (J, D) the same way
//! ```
//!
//! Each (J, D) advances once (`task_lifecycle::advance_dependent`), so duplicate events and any
//! number of dependency services are harmless.

use chime_core::bus::Topology;
use chime_core::model::{TaskEvent, TaskStatus};
use chime_core::store::dependencies::{self, Verdict};
use chime_core::store::task_lifecycle::{self, Advanced, DependencyOutcome};
use chime_core::store::{Context, Store, StoreError};
use tracing::debug;

/// Acts on one task event.
pub async fn on_event(
    store: &Store,
    topology: &Topology,
    event: &TaskEvent,
) -> Result<(), StoreError> {
    let (Some(job_id), Some(data_time)) = (event.job_id, event.data_time) else {
        return Ok(());
    };
    match event.status {
        TaskStatus::Waiting => advance(store, topology, job_id, data_time, None)
            .await
            .map(drop),
        TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Killed => {
            let lineage: Option<(Option<i64>, Option<bool>)> = sqlx::query_as(
                "SELECT t.backfill_id, b.with_downstream
                 FROM tasks t LEFT JOIN backfills b ON b.id = t.backfill_id WHERE t.id = $1",
            )
            .bind(event.task_id)
            .fetch_optional(store.pool())
            .await
            .context("reading the task's backfill")?;
            let lineage = match lineage {
                Some((Some(backfill), with_downstream)) => {
                    task_lifecycle::promote_backfill(store, topology, backfill).await?;
                    Some((backfill, with_downstream.unwrap_or(false)))
                }
                _ => None,
            };
            for downstream in dependencies::downstreams(store, job_id).await? {
                let at = downstream.data_time_for(data_time);
                advance(store, topology, downstream.job_id, at, lineage).await?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

pub(crate) async fn advance(
    store: &Store,
    topology: &Topology,
    job_id: i64,
    data_time: jiff::Timestamp,
    lineage: Option<(i64, bool)>,
) -> Result<bool, StoreError> {
    let outcome = match dependencies::evaluate(store, job_id, data_time).await? {
        Verdict::Ready => DependencyOutcome::Met,
        Verdict::Failed { .. } => DependencyOutcome::UpstreamFailed,
        Verdict::Waiting(unmet) => {
            debug!(job_id, %data_time, waiting_on = unmet.len(), "not yet");
            // Blocked by a failed upstream (policy `wait`): a job without a trigger of its own
            // gets its run as a waiting task that says so, rather than no task at all.
            if unmet
                .iter()
                .any(|u| u.state.ends_with("waiting for a rerun"))
                && let Some(task) =
                    task_lifecycle::record_blocked(store, topology, job_id, data_time).await?
            {
                debug!(job_id, %data_time, %task, "downstream blocked by a failed upstream");
            }
            return Ok(false);
        }
    };
    let advanced =
        task_lifecycle::advance_dependent(store, topology, job_id, data_time, outcome, lineage)
            .await?;
    match advanced {
        Advanced::Ready(task) => {
            debug!(job_id, %data_time, %task, "downstream ready");
            metrics::counter!("chime_dependency_advances_total", "outcome" => "ready").increment(1);
        }
        Advanced::Failed(task) => {
            debug!(job_id, %data_time, %task, "downstream failed: upstream failed");
            metrics::counter!("chime_dependency_advances_total", "outcome" => "failed")
                .increment(1);
        }
        Advanced::AlreadyDone | Advanced::NothingToMove => return Ok(false),
    }
    Ok(true)
}
