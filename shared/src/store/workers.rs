//! The worker registry: one row per worker process, its groups, kinds and heartbeat, and how a
//! dead worker is told from a silent one.
//!
//! ```text
//!   online ──SIGTERM / drain──▶ draining ──running tasks done──▶ offline
//!      └── heartbeat stale ──▶ disconnected ──heartbeat──▶ online
//!      └── lease expired (no renewal, no grace) ──recovery──▶ offline (its attempts recovered)
//! ```
//!
//! Liveness is a lease. Every [`HEARTBEAT_INTERVAL`] a worker moves its row's `lease_expires_at`
//! to the database's now() plus [`LEASE`], over a PostgreSQL connection of its own
//! ([`LivenessSession`]) so that a busy pool never delays it. Recovery
//! (`task_lifecycle::recover_lost_attempts`) declares a worker dead only once its lease has
//! expired by the database's clock: a lost session proves nothing (a frozen worker's commands go
//! on running), and a worker killed with -9 is dead [`LEASE`] after its last heartbeat.
//!
//! The worker's side of the bargain: before its lease can expire, every process of its attempts
//! is gone. It counts the lease from before it sent the heartbeat that renewed it, stops its
//! attempts itself when the lease is about to run out unrenewed, and a guard process of its own
//! (`services/worker/src/executor/sandbox.rs`), which needs nothing from the worker to act, kills
//! them at [`GUARD_MARGIN`] before the lease ends, frozen worker or not.
//!
//! One exception keeps a database restart or a failover from killing every running task: when
//! the server itself refuses the worker (the connection is refused, or closed by a proxy that
//! has no primary to send it to, or the server says it is starting up or recovering, or is a
//! read-only standby), nobody can recover anyone, and recovery waits [`RESTART_GRACE`] from when
//! it first sees the server back (a new `pg_postmaster_start_time()`, or the `UNLOGGED` table
//! `server_starts` that a crash recovery, or a standby's promotion, empties). The worker's lease then holds on, if it was
//! still held when the refusal came, for at most [`RESTART_GRACE`] from that refusal, and only
//! while the broker keeps the worker's grace mark (`crate::bus::grace`); it renews it as soon as
//! the server answers again. Every refusal comes before the server is back, so the worker's grace
//! ends before recovery's: counting recovery's from the postmaster's start instead would let a
//! slow start (a long crash recovery) end it first. A refusal may also come from something
//! between one worker and a server that serves everyone else (a firewall REJECT, a proxy
//! restarting): recovery, which then sees no restart, declares no worker dead while its mark is
//! on the broker, nor until its mark has been gone [`crate::bus::grace::ABSENT_FOR`], longer
//! than the worker holds its attempts on one answer about it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::{ConnectOptions, FromRow, PgConnection};
use utoipa::ToSchema;
use uuid::Uuid;

use super::task_lifecycle::WorkerIdentity;
use super::{Context, Store, StoreError};

/// How often a worker renews its lease (over its liveness session).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(250);
/// How long a heartbeat's lease lasts by default (`worker.lease_ms`), from the database's now()
/// when it was written. A worker killed with -9 is declared dead about this long after its last
/// heartbeat; a worker whose heartbeats take long asks for longer ones.
pub const LEASE: Duration = Duration::from_millis(2500);
/// How long before its lease ends, counted from before the heartbeat that renewed it was sent, a
/// worker's guard kills every process of the worker's attempts: the time it has to act.
pub const GUARD_MARGIN: Duration = Duration::from_millis(500);
/// For this long after the database restarted or recovered from a crash, no worker is declared
/// dead: every worker's lease ran out while it was away, and each needs a moment to renew it.
pub const RESTART_GRACE: Duration = Duration::from_secs(20);
/// A live worker whose last heartbeat is older than this is shown `disconnected`; a worker row
/// without a liveness key (written by an older version) is dead past it.
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
    /// How many tasks that run as processes (shell, command templates) it runs at once.
    pub concurrency: i32,
    /// How many noop and http tasks it runs at once, inside itself (0: a worker of a version
    /// that ran them in its process slots).
    #[serde(default)]
    pub inline_concurrency: i32,
    /// online, draining, disconnected or offline.
    pub status: String,
    /// When it started.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: jiff::Timestamp,
    /// Its last heartbeat.
    #[schema(value_type = String, format = DateTime)]
    pub last_heartbeat: jiff::Timestamp,
    /// Tasks it runs now.
    #[serde(default)]
    pub running: i64,
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
    /// Process slots.
    pub concurrency: u16,
    /// Inline slots.
    pub inline_concurrency: u16,
    /// Its first lease.
    pub lease: Duration,
}

/// Registers a worker as online (and its groups in `worker_groups`), with a first lease of
/// `worker.lease`: the caller counts it from before this call.
pub async fn register(store: &Store, worker: NewWorker<'_>) -> Result<(), StoreError> {
    sqlx::query(
        r#"
        WITH groups AS (
            INSERT INTO worker_groups (name) SELECT unnest($5::text[]) ON CONFLICT DO NOTHING
        )
        INSERT INTO workers (id, name, host, pid, groups, kinds, concurrency, inline_concurrency,
                             status, version, lease_expires_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $10, 'online', $8,
                now() + make_interval(secs => $9))
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
    .bind(worker.lease.as_secs_f64())
    .bind(i32::from(worker.inline_concurrency))
    .execute(store.pool())
    .await
    .context("registering the worker")?;
    Ok(())
}

/// A worker's own PostgreSQL connection, over which it renews its lease.
#[derive(Debug)]
pub struct LivenessSession {
    conn: PgConnection,
}

/// What a heartbeat learned.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// Attempts this worker runs whose kill was requested: the backstop for a kill command that
    /// did not reach it.
    pub kill: Vec<(Uuid, i32)>,
    /// Attempts this worker runs that are no longer its own in the database (its lease ran out and
    /// recovery declared it dead): they must be killed at once.
    pub taken: Vec<(Uuid, i32)>,
    /// Attempts running under this worker in the database that it does not hold (a start that
    /// committed while the worker saw an error): seen twice in a row, they are released.
    pub unheld: Vec<(Uuid, i32)>,
}

impl LivenessSession {
    /// Opens a connection of its own for the worker's heartbeats.
    pub async fn open(store: &Store) -> Result<Self, StoreError> {
        let mut conn = store
            .pool()
            .connect_options()
            .as_ref()
            .clone()
            .connect()
            .await
            .context("opening the liveness session")?;
        // A standby (a failover under way) refuses it, as the pool's connections are refused.
        super::availability::refuse_standby(&mut conn)
            .await
            .context("opening the liveness session")?;
        // The server probes an idle peer after 10 s, every 3 s, 3 times: the session of a host
        // that vanished without closing its connection does not linger. A renewal does not wait
        // for its commit to reach the disk (a busy disk would otherwise let leases run out): one
        // lost in a crash is harmless, since nobody is declared dead for RESTART_GRACE after a
        // crash recovery.
        sqlx::query(
            "SELECT set_config('tcp_keepalives_idle', '10', false),
                    set_config('tcp_keepalives_interval', '3', false),
                    set_config('tcp_keepalives_count', '3', false),
                    set_config('synchronous_commit', 'off', false)",
        )
        .execute(&mut conn)
        .await
        .context("setting the liveness session's keepalives")?;
        Ok(Self { conn })
    }

    /// Renews the worker's lease and records that it is alive, as `status` (online or draining)
    /// if it had been marked disconnected or offline, and compares the attempts it holds with the database:
    /// `running` (started, not yet ending) and `all` (also those starting or ending).
    pub async fn heartbeat(
        &mut self,
        id: Uuid,
        status: &str,
        running: &[(Uuid, i32)],
        all: &[(Uuid, i32)],
        lease: Duration,
    ) -> Result<Heartbeat, StoreError> {
        let (running_ids, running_attempts): (Vec<Uuid>, Vec<i32>) =
            running.iter().copied().unzip();
        let (all_ids, all_attempts): (Vec<Uuid>, Vec<i32>) = all.iter().copied().unzip();
        let rows: Vec<(String, Uuid, i32)> = sqlx::query_as(
            r#"
            WITH beat AS (
                UPDATE workers SET last_heartbeat = now(), stopped_at = NULL,
                       -- Never earlier than a lease already given: the worker counts the
                       -- longest it was told, so a shorter one here would end before its own.
                       lease_expires_at = GREATEST(lease_expires_at,
                                                   now() + make_interval(secs => $7)),
                       status = CASE WHEN status IN ('disconnected', 'offline') THEN $2
                                     ELSE status END
                WHERE id = $1
            ), mine AS (
                SELECT id, attempt, kill_requested_at FROM tasks
                WHERE worker_id = $1 AND status = 'running'
            )
            SELECT 'kill', id, attempt FROM mine WHERE kill_requested_at IS NOT NULL
            UNION ALL
            SELECT 'taken', r.id, r.attempt FROM UNNEST($3::uuid[], $4::int[]) AS r(id, attempt)
            WHERE NOT EXISTS (SELECT 1 FROM mine m WHERE m.id = r.id AND m.attempt = r.attempt)
            UNION ALL
            SELECT 'unheld', m.id, m.attempt FROM mine m
            WHERE NOT EXISTS (SELECT 1 FROM UNNEST($5::uuid[], $6::int[]) AS h(id, attempt)
                              WHERE h.id = m.id AND h.attempt = m.attempt)
            "#,
        )
        .bind(id)
        .bind(status)
        .bind(&running_ids)
        .bind(&running_attempts)
        .bind(&all_ids)
        .bind(&all_attempts)
        .bind(lease.as_secs_f64())
        .fetch_all(&mut self.conn)
        .await
        .context("recording the worker's heartbeat")?;
        let mut beat = Heartbeat::default();
        for (what, task, attempt) in rows {
            match what.as_str() {
                "kill" => beat.kill.push((task, attempt)),
                "taken" => beat.taken.push((task, attempt)),
                _ => beat.unheld.push((task, attempt)),
            }
        }
        Ok(beat)
    }

    /// Whether a failure to open the session proves the server is down for everyone: the
    /// connection was refused (nothing listens on its port, or the server is a read-only
    /// standby: [`super::availability::StandbyRefused`]), closed while it was being opened (a
    /// proxy in front of PostgreSQL, such as HAProxy, that has no primary to send it to while a
    /// failover is under way, closes it before any server speaks; a close later in the opening
    /// counts alike), or the server said it is starting up or recovering (SQLSTATE 57P03). Not "shutting down": during a smart or fast shutdown
    /// the sessions already open (recovery's among them) go on a while. Then nobody can
    /// declare the worker dead until the server is back and [`RESTART_GRACE`] has passed, and its
    /// lease holds meanwhile. A timeout proves nothing (a partition looks the same): the lease
    /// runs out. A refusal from a proxy whose database is up for others is told apart by
    /// recovery, which sees the worker's grace mark on the broker (see the module's doc).
    pub fn server_is_down(error: &StoreError) -> bool {
        let StoreError::Database { source, .. } = error else {
            return false;
        };
        match source {
            sqlx::Error::Io(io) => matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            ),
            other => other.as_database_error().is_some_and(|e| {
                // Read in English, the server's default: a translated message counts as not
                // down, which only lets the lease run out.
                let message = e.message();
                e.code().is_some_and(|code| code == "57P03")
                    && (message.contains("starting up")
                        || message.contains("recovery")
                        || message.contains("not yet accepting"))
            }),
        }
    }

    /// Closes the connection.
    pub async fn close(self) {
        let _ = sqlx::Connection::close(self.conn).await;
    }
}

/// The live workers whose lease has expired or expires within `within`, each with its lease's
/// end: those whose refusal-grace mark recovery looks for (see [`crate::bus::grace`]). A lease
/// renewed since is another lease, whose mark is looked for afresh.
pub async fn lease_ending(
    store: &Store,
    within: Duration,
) -> Result<Vec<(Uuid, jiff::Timestamp)>, StoreError> {
    let ending: Vec<(Uuid, jiff_sqlx::Timestamp)> = sqlx::query_as(
        "SELECT id, lease_expires_at FROM workers
         WHERE status IN ('online', 'draining', 'disconnected')
           AND lease_expires_at < now() + make_interval(secs => $1)",
    )
    .bind(within.as_secs_f64())
    .fetch_all(store.pool())
    .await
    .context("finding workers whose lease ends")?;
    Ok(ending
        .into_iter()
        .map(|(id, ends)| (id, ends.to_jiff()))
        .collect())
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
    inline_concurrency: i32,
    status: String,
    started_at: jiff_sqlx::Timestamp,
    last_heartbeat: jiff_sqlx::Timestamp,
    running: i64,
}

/// Workers seen in the last day, live ones first. A live worker whose heartbeat is older than
/// [`STALE_AFTER`] is shown `disconnected`.
pub async fn list(store: &Store) -> Result<Vec<WorkerView>, StoreError> {
    let rows: Vec<WorkerRow> = sqlx::query_as(
        r#"
        SELECT id, name, host, pid, groups, kinds, concurrency, inline_concurrency,
               CASE WHEN status IN ('online', 'draining')
                         AND last_heartbeat < now() - make_interval(secs => $1 / 1000.0)
                    THEN 'disconnected' ELSE status END AS status,
               started_at, last_heartbeat,
               (SELECT count(*) FROM tasks t WHERE t.worker_id = w.id AND t.status = 'running')
                   AS running
        FROM workers w
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
            inline_concurrency: r.inline_concurrency,
            status: r.status,
            started_at: r.started_at.to_jiff(),
            last_heartbeat: r.last_heartbeat.to_jiff(),
            running: r.running,
        })
        .collect())
}

/// Asks a live worker to drain (`chime worker drain ID`): a `drain` command to its control queue,
/// through the outbox. The worker stops taking work, returns what it has not started, finishes
/// what runs within its grace and goes offline, as on SIGTERM.
pub async fn request_drain(
    store: &Store,
    topology: &crate::bus::Topology,
    id: Uuid,
) -> Result<(), StoreError> {
    let status: Option<String> = sqlx::query_scalar(
        r#"
        WITH worker AS (SELECT id, status FROM workers WHERE id = $1), command AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $2, id::text, jsonb_build_object('v', 1, 'command', 'drain')
            FROM worker WHERE status IN ('online', 'disconnected')
        )
        SELECT status FROM worker
        "#,
    )
    .bind(id)
    .bind(topology.control_exchange())
    .fetch_optional(store.pool())
    .await
    .context("asking the worker to drain")?;
    store.outbox_written();
    match status.as_deref() {
        None => Err(StoreError::NotFound(format!("worker {id}"))),
        Some("online" | "disconnected") => Ok(()),
        Some(other) => Err(StoreError::Conflict(format!(
            "worker {id} is {other}: only an online worker can be drained"
        ))),
    }
}
