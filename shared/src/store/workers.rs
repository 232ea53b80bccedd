//! The worker registry: one row per worker process, its groups, kinds and heartbeat.
//!
//! ```text
//!   online ──SIGTERM──▶ draining ──running tasks done──▶ offline
//!      └──────── heartbeat stale ────────▶ disconnected
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::FromRow;
use utoipa::ToSchema;
use uuid::Uuid;

use super::task_lifecycle::WorkerIdentity;
use super::{Context, Store, StoreError};

/// How often a worker records that it is alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// A live worker whose last heartbeat is older than this is `disconnected`.
pub const STALE_AFTER: Duration = Duration::from_secs(15);

/// A worker as `chime workers` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerView {
    /// Its id.
    pub id: Uuid,
    /// Its name (host-pid-suffix).
    pub name: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: i32,
    /// The worker groups it consumes.
    pub groups: Vec<String>,
    /// The executor kinds it has.
    pub kinds: Vec<String>,
    /// How many tasks it runs at once.
    pub concurrency: i32,
    /// online, draining, disconnected or offline.
    pub status: String,
    /// When it started.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: jiff::Timestamp,
    /// Its last heartbeat.
    #[schema(value_type = String, format = DateTime)]
    pub last_heartbeat: jiff::Timestamp,
}

/// What a worker registers about itself.
#[derive(Debug, Clone)]
pub struct NewWorker<'a> {
    /// Its identity (id and name).
    pub identity: &'a WorkerIdentity,
    /// Host name.
    pub host: &'a str,
    /// Process id.
    pub pid: u32,
    /// Groups consumed.
    pub groups: &'a [String],
    /// Executor kinds.
    pub kinds: &'a [String],
    /// Concurrency.
    pub concurrency: u16,
}

/// Registers a worker as online (and its groups in `worker_groups`).
pub async fn register(store: &Store, worker: NewWorker<'_>) -> Result<(), StoreError> {
    sqlx::query(
        r#"
        WITH groups AS (
            INSERT INTO worker_groups (name) SELECT unnest($5::text[]) ON CONFLICT DO NOTHING
        )
        INSERT INTO workers (id, name, host, pid, groups, kinds, concurrency, status, version)
        VALUES ($1, $2, $3, $4, $5, $6, $7, 'online', $8)
        "#,
    )
    .bind(worker.identity.id)
    .bind(&worker.identity.name)
    .bind(worker.host)
    .bind(i32::try_from(worker.pid).unwrap_or(i32::MAX))
    .bind(worker.groups)
    .bind(worker.kinds)
    .bind(i32::from(worker.concurrency))
    .bind(env!("CARGO_PKG_VERSION"))
    .execute(store.pool())
    .await
    .context("registering the worker")?;
    Ok(())
}

/// Records that the worker is alive (and back online if it had been marked disconnected), and
/// returns the attempts it runs whose kill was requested: the backstop for a kill command that did
/// not reach it (it was reconnecting to the broker).
pub async fn heartbeat(store: &Store, id: Uuid) -> Result<Vec<(Uuid, i32)>, StoreError> {
    sqlx::query_as(
        "WITH beat AS (
             UPDATE workers SET last_heartbeat = now(),
                    status = CASE WHEN status = 'disconnected' THEN 'online' ELSE status END
             WHERE id = $1
         )
         SELECT id, attempt FROM tasks
         WHERE worker_id = $1 AND status = 'running' AND kill_requested_at IS NOT NULL",
    )
    .bind(id)
    .fetch_all(store.pool())
    .await
    .context("recording the worker's heartbeat")
}

/// Marks workers whose heartbeat is older than `stale_after` as `disconnected` (a heartbeat
/// brings them back online). Returns how many changed.
pub async fn mark_disconnected(store: &Store, stale_after: Duration) -> Result<u64, StoreError> {
    let changed = sqlx::query(
        "UPDATE workers SET status = 'disconnected'
         WHERE status IN ('online', 'draining')
           AND last_heartbeat < now() - make_interval(secs => $1)",
    )
    .bind(stale_after.as_secs_f64())
    .execute(store.pool())
    .await
    .context("marking silent workers disconnected")?;
    Ok(changed.rows_affected())
}

/// Moves the worker to `draining` or `offline`.
pub async fn set_status(store: &Store, id: Uuid, status: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE workers SET status = $2,
                stopped_at = CASE WHEN $2 = 'offline' THEN now() ELSE stopped_at END
         WHERE id = $1",
    )
    .bind(id)
    .bind(status)
    .execute(store.pool())
    .await
    .context("changing the worker's status")?;
    Ok(())
}

#[derive(FromRow)]
struct WorkerRow {
    id: Uuid,
    name: String,
    host: String,
    pid: i32,
    groups: Vec<String>,
    kinds: Vec<String>,
    concurrency: i32,
    status: String,
    started_at: jiff_sqlx::Timestamp,
    last_heartbeat: jiff_sqlx::Timestamp,
}

/// Workers seen in the last day, live ones first. A live worker whose heartbeat is older than
/// [`STALE_AFTER`] is shown `disconnected`.
pub async fn list(store: &Store) -> Result<Vec<WorkerView>, StoreError> {
    let rows: Vec<WorkerRow> = sqlx::query_as(
        r#"
        SELECT id, name, host, pid, groups, kinds, concurrency,
               CASE WHEN status IN ('online', 'draining')
                         AND last_heartbeat < now() - make_interval(secs => $1 / 1000.0)
                    THEN 'disconnected' ELSE status END AS status,
               started_at, last_heartbeat
        FROM workers
        WHERE status <> 'offline' OR stopped_at > now() - interval '1 day'
        ORDER BY status = 'offline', started_at DESC
        "#,
    )
    .bind(STALE_AFTER.as_millis() as f64)
    .fetch_all(store.pool())
    .await
    .context("listing workers")?;
    Ok(rows
        .into_iter()
        .map(|r| WorkerView {
            id: r.id,
            name: r.name,
            host: r.host,
            pid: r.pid,
            groups: r.groups,
            kinds: r.kinds,
            concurrency: r.concurrency,
            status: r.status,
            started_at: r.started_at.to_jiff(),
            last_heartbeat: r.last_heartbeat.to_jiff(),
        })
        .collect())
}
