//! The database is the truth: a periodic sweep does what lost events would have done.
//!
//! Task events reach the dependency service through the bus; one lost there (dead-lettered
//! during an outage, or published while no queue was bound) would leave a downstream task
//! `waiting` with its upstreams met, or a backfill without its next task. Every
//! [`SWEEP_EVERY`], one service at a time (an advisory lock) evaluates the (job, data time) of
//! waiting tasks older than [`SETTLE`] exactly as an event would (`advance::advance`, which
//! advances each once), and promotes backfills with free slots.

use std::time::Duration;

use chime_core::bus::Topology;
use chime_core::store::{Context, Store, StoreError, task_lifecycle};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

/// How often the sweep runs.
pub const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// A waiting task younger than this is left to its events.
pub const SETTLE: Duration = Duration::from_secs(5);
/// The most (job, data time) pairs one sweep evaluates.
const BATCH: i64 = 500;
/// The advisory lock that lets one dependency service at a time sweep.
const SWEEP_LOCK: i64 = 0x6368_696d_6573_7765; // "chimeswe"

/// Sweeps until `shutdown`.
pub async fn run(store: Store, topology: Topology, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut cursor = None;
    async {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Raced with shutdown: a sweep is several statements, each of which may wait for a
            // connection; what it had not committed, the next service's sweep redoes.
            let swept = tokio::select! {
                _ = shutdown.cancelled() => return,
                swept = sweep(&store, &topology, &mut cursor) => swept,
            };
            match swept {
                Ok(0) => {}
                Ok(moved) => {
                    info!(moved, "sweep advanced what events had not");
                    metrics::counter!("chime_dependency_sweep_advances_total")
                        .increment(moved as u64);
                }
                Err(error) => warn!(%error, "dependency sweep failed"),
            }
            metrics::counter!("chime_dependency_sweeps_total").increment(1);
        }
    }
    .instrument(info_span!("dependency_sweep"))
    .await
}

/// Where a sweep stopped: the last (job, data time) it evaluated. More waiting pairs than one
/// sweep evaluates are taken page by page, so none is left out for ever.
pub type Cursor = Option<(i64, jiff_sqlx::Timestamp)>;

/// One sweep, from `cursor` on (moved to where it stopped, or back to the start); returns how
/// many (job, data time) advanced and backfill tasks were promoted.
pub async fn sweep(
    store: &Store,
    topology: &Topology,
    cursor: &mut Cursor,
) -> Result<usize, StoreError> {
    let mut lock = store.begin().await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(SWEEP_LOCK)
        .fetch_one(&mut *lock)
        .await
        .context("taking the sweep lock")?;
    if !locked {
        return Ok(0);
    }
    let (after_job, after_time) = cursor.unzip();
    let waiting: Vec<(i64, jiff_sqlx::Timestamp)> = sqlx::query_as(
        "SELECT DISTINCT job_id, data_time FROM tasks
         WHERE status = 'waiting' AND job_id IS NOT NULL
           AND NOT awaits_backfill_turn(backfill_id, job_id)
           AND data_time IS NOT NULL AND created_at < now() - make_interval(secs => $1)
           AND ($3::bigint IS NULL OR (job_id, data_time) > ($3, $4))
         ORDER BY job_id, data_time
         LIMIT $2",
    )
    .bind(SETTLE.as_secs_f64())
    .bind(BATCH)
    .bind(after_job)
    .bind(after_time)
    .fetch_all(store.pool())
    .await
    .context("finding waiting tasks")?;
    *cursor = match waiting.last() {
        Some(last) if waiting.len() as i64 == BATCH => Some(*last),
        _ => None,
    };
    let mut moved = 0;
    for (job_id, data_time) in waiting {
        if crate::advance::advance(store, topology, job_id, data_time.to_jiff(), None).await? {
            moved += 1;
        }
    }
    let backfills: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT backfill_id FROM tasks
         WHERE status = 'waiting' AND backfill_id IS NOT NULL
           AND created_at < now() - make_interval(secs => $1)",
    )
    .bind(SETTLE.as_secs_f64())
    .fetch_all(store.pool())
    .await
    .context("finding backfills with waiting tasks")?;
    for backfill in backfills {
        moved += task_lifecycle::promote_backfill(store, topology, backfill).await?;
    }
    lock.commit().await.context("releasing the sweep lock")?;
    Ok(moved)
}
