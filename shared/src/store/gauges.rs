//! The numbers that say whether the system keeps up, read from the store for metrics and the
//! dashboard: live tasks by status and worker group, workers online, and the outbox's backlog.
//! Each read walks an index (live statuses, live workers, unsent outbox rows), never the history.

use serde::Serialize;
use utoipa::ToSchema;

use super::{Context, Store, StoreError};

/// A snapshot of the system's load.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct SystemGauges {
    /// Tasks not yet ended, as (status, worker group, count).
    pub live_tasks: Vec<(String, String, i64)>,
    /// Workers online or draining with a recent heartbeat, as (worker group, count); a worker
    /// serving two groups counts in each.
    pub workers_online: Vec<(String, i64)>,
    /// Outbox rows due and not yet published.
    pub outbox_backlog: i64,
    /// Seconds since the oldest of them was due (0 when there is none).
    pub outbox_oldest_seconds: f64,
    /// Declared worker groups.
    pub worker_groups: Vec<String>,
}

impl SystemGauges {
    /// Workers online serving `group`.
    pub fn workers_online_in(&self, group: &str) -> i64 {
        self.workers_online
            .iter()
            .find(|(g, _)| g == group)
            .map_or(0, |(_, n)| *n)
    }
}

/// Reads the snapshot (four statements, each on an index).
pub async fn read(store: &Store) -> Result<SystemGauges, StoreError> {
    let live_tasks: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT status, worker_group, count(*) FROM tasks
         WHERE status IN ('waiting', 'ready', 'running', 'retrying')
         GROUP BY status, worker_group ORDER BY status, worker_group",
    )
    .fetch_all(store.pool())
    .await
    .context("counting live tasks")?;
    let workers_online: Vec<(String, i64)> = sqlx::query_as(
        "SELECT g, count(*) FROM workers, unnest(groups) AS g
         WHERE status IN ('online', 'draining')
           AND last_heartbeat > now() - interval '60 seconds'
         GROUP BY g ORDER BY g",
    )
    .fetch_all(store.pool())
    .await
    .context("counting workers online")?;
    let (outbox_backlog, outbox_oldest_seconds): (i64, Option<f64>) = sqlx::query_as(
        "SELECT count(*), EXTRACT(EPOCH FROM now() - min(publish_at))::float8 FROM outbox
         WHERE published_at IS NULL AND publish_at <= now()",
    )
    .fetch_one(store.pool())
    .await
    .context("reading the outbox backlog")?;
    let worker_groups: Vec<String> =
        sqlx::query_scalar("SELECT name FROM worker_groups ORDER BY name")
            .fetch_all(store.pool())
            .await
            .context("listing worker groups")?;
    Ok(SystemGauges {
        live_tasks,
        workers_online,
        outbox_backlog,
        outbox_oldest_seconds: outbox_oldest_seconds.unwrap_or(0.0).max(0.0),
        worker_groups,
    })
}

/// Each job's latest success, as `(group.name, seconds since the epoch)` (0: none yet): what an
/// alert such as "job X has not succeeded in 25 h" reads. One short backward scan per job on
/// `tasks_by_job_data_time`, stopping at its newest succeeded run.
pub async fn last_successes(store: &Store) -> Result<Vec<(String, f64)>, StoreError> {
    sqlx::query_as(
        "SELECT j.group_name || '.' || j.name,
                coalesce(extract(epoch FROM (
                    SELECT t.finished_at FROM tasks t
                    WHERE t.job_id = j.id AND t.status = 'succeeded'
                    ORDER BY t.data_time DESC LIMIT 1)), 0)::float8
         FROM jobs j ORDER BY j.group_name, j.name",
    )
    .fetch_all(store.pool())
    .await
    .context("reading each job's latest success")
}
