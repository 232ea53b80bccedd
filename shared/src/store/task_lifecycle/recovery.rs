//! Attempts whose worker is gone: recovery declares a worker dead once its lease has expired
//! and closes its attempts as `lost`; a worker that lets attempts go records them the same way;
//! `ready` tasks whose message was lost are published again.

use uuid::Uuid;

use super::{
    MessageParts, WorkerIdentity, commit, enqueue_current_attempts, enqueue_task_messages,
};
use crate::bus::Topology;
use crate::model::TaskMessage;
use crate::model::kinds::INLINE_KINDS;
use crate::store::{Context, Store, StoreError};

/// The advisory lock that lets one scheduler instance at a time recover lost attempts.
const RECOVERY_LOCK: i64 = 0x6368_696d_6572_6563; // "chimerec"

/// Which running attempts [`recover_lost_attempts`] looks at.
#[derive(Debug, Clone, Copy)]
pub enum LostScope {
    /// Every attempt whose worker is gone, oldest first, up to a limit.
    All {
        /// The most to recover in one call.
        limit: i64,
    },
    /// Only this attempt (a redelivered message found it running under another worker), if that
    /// worker is gone by the same test as [`LostScope::All`].
    Attempt {
        /// The task.
        task_id: Uuid,
        /// The attempt.
        attempt: i32,
    },
}

/// Why a worker gives up attempts that are still `running` under it ([`release_attempts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Its shutdown cut them short (past the grace): handled as if the worker had died, so the
    /// job's `requests_recovery` decides, never its failed budget alone.
    Interrupted,
    /// They never ran: it does not hold them (their start committed while it saw an error), or
    /// it let them go before their commands started (the lease they were taken under ran out
    /// meanwhile). They run again as the next attempt whatever the job says.
    NeverRan,
}

/// `running → ready (next attempt) | retrying | failed | killed` for attempts whose worker is
/// gone: the attempt is closed as `lost`; a task whose kill was requested ends `killed`; a job
/// that requests recovery runs again as the next attempt; otherwise the failed budget decides
/// (reason `lost`). One caller at a time (advisory lock); returns how many were recovered.
///
/// A worker is gone when it said so (`offline`), or — only if `may_declare_dead` is given — when
/// its lease has expired by the database's clock (see `workers.rs`) and it holds no refusal grace
/// (see [`crate::bus::grace`]): it is among the `may_declare_dead` ids, whose mark the caller has
/// seen absent long enough, or the longest grace has passed too. Such a worker is marked
/// `offline` here. Its heartbeat, if it comes at that moment, waits for this transaction on the worker's
/// row and then learns which attempts were taken; one that comes first renews the lease and
/// the worker is not declared dead. For [`workers::RESTART_GRACE`] after recovery first saw the
/// database up again, restarted (a new `pg_postmaster_start_time()`) or recovered from a crash
/// (the `UNLOGGED` table `server_starts` came back empty), nobody is declared dead: every lease
/// ran out while it was away.
///
/// [`workers::RESTART_GRACE`]: crate::store::workers::RESTART_GRACE
pub async fn recover_lost_attempts(
    conn: &mut sqlx::PgConnection,
    topology: &Topology,
    scope: LostScope,
    may_declare_dead: Option<&[Uuid]>,
) -> Result<usize, StoreError> {
    use crate::store::workers::{RESTART_GRACE, STALE_AFTER};
    use sqlx::Connection;
    let (only_task, only_attempt, limit) = match scope {
        LostScope::All { limit } => (None, None, limit),
        LostScope::Attempt { task_id, attempt } => (Some(task_id), Some(attempt), 1),
    };
    let mut tx = conn.begin().await.context("starting a transaction")?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(RECOVERY_LOCK)
        .fetch_one(&mut *tx)
        .await
        .context("taking the recovery lock")?;
    if !locked {
        return Ok(0);
    }
    if let Some(unmarked) = may_declare_dead
        && !store_restarted_recently(&mut tx).await?
    {
        // A worker row without a lease (written by an older version) is dead once its heartbeat
        // is STALE_AFTER old. One with a lease, once it expired and its refusal-grace mark has
        // been seen absent long enough (`unmarked`), or the longest grace has passed.
        sqlx::query(
            r#"
            UPDATE workers w SET status = 'offline', stopped_at = now()
            WHERE w.status IN ('online', 'draining', 'disconnected')
              AND coalesce(w.lease_expires_at,
                           w.last_heartbeat + make_interval(secs => $1)) < now()
              AND (w.lease_expires_at IS NULL OR w.id = ANY($2)
                   OR w.lease_expires_at + make_interval(secs => $3) < now())
            "#,
        )
        .bind(STALE_AFTER.as_secs_f64())
        .bind(unmarked)
        .bind((RESTART_GRACE + crate::bus::grace::MARK_LEASE).as_secs_f64())
        .execute(&mut *tx)
        .await
        .context("declaring dead workers")?;
    }
    let lost: Vec<(Uuid, i32)> = sqlx::query_as(
        r#"
        SELECT t.id, t.attempt
        FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id
        WHERE t.status = 'running' AND (w.id IS NULL OR w.status = 'offline')
          AND ($2::uuid IS NULL OR (t.id = $2 AND t.attempt = $3))
        ORDER BY t.started_at
        LIMIT $1
        FOR UPDATE OF t SKIP LOCKED
        "#,
    )
    .bind(limit)
    .bind(only_task)
    .bind(only_attempt)
    .fetch_all(&mut *tx)
    .await
    .context("finding lost attempts")?;
    let recovered = close_lost_attempts(
        &mut tx,
        topology,
        &lost,
        None,
        false,
        "its worker stopped responding",
    )
    .await?;
    tx.commit().await.context("committing recovery")?;
    Ok(recovered)
}

/// Publishes the messages of `ready` tasks that a worker took when it recorded their
/// submissions ([`super::submit_routed_taking`]) and has not started: those of a worker now gone
/// (offline, or declared dead by [`recover_lost_attempts`]), and those taken longer than
/// `older_than` ago by any worker — one that lost the answer to its commit, or could not give a
/// task back, has no other way to. No message of them exists, so no other worker could start
/// them; from here they are ordinary ready tasks, and a copy too many is harmless (one start
/// wins). Returns how many.
pub async fn publish_unstarted_taken(
    store: &Store,
    topology: &Topology,
    older_than: std::time::Duration,
    limit: i64,
) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let taken: Vec<MessageParts> = sqlx::query_as(
        r#"
        UPDATE tasks t SET worker_id = NULL, republished_at = now()
        FROM (
            SELECT t.id
            FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id
            WHERE t.status = 'ready' AND t.worker_id IS NOT NULL
              AND (w.id IS NULL OR w.status = 'offline'
                   OR t.ready_at < now() - make_interval(secs => $2))
            LIMIT $1
            FOR UPDATE OF t SKIP LOCKED
        ) s
        WHERE t.id = s.id
        RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                  t.timeout_ms, t.execute_user
        "#,
    )
    .bind(limit)
    .bind(older_than.as_secs_f64())
    .fetch_all(&mut *tx)
    .await
    .context("finding taken tasks no worker started")?;
    enqueue_current_attempts(&mut tx, topology, &taken).await?;
    commit(store, tx, "committing the messages of taken tasks").await?;
    Ok(taken.len())
}

/// Whether recovery first saw the database up, after a restart or a crash recovery, less than
/// [`workers::RESTART_GRACE`] ago (see [`recover_lost_attempts`]); records the first sighting of
/// a new server start, which begins the grace.
///
/// [`workers::RESTART_GRACE`]: crate::store::workers::RESTART_GRACE
async fn store_restarted_recently(tx: &mut sqlx::PgConnection) -> Result<bool, StoreError> {
    // Under the recovery lock: one caller at a time records a sighting.
    sqlx::query_scalar(
        r#"
        WITH seen AS (
            SELECT first_seen_at FROM server_starts
            WHERE postmaster_started_at = pg_postmaster_start_time()
        ), forgotten AS (
            DELETE FROM server_starts
            WHERE postmaster_started_at <> pg_postmaster_start_time()
        ), recorded AS (
            INSERT INTO server_starts (postmaster_started_at, first_seen_at)
            SELECT pg_postmaster_start_time(), now() WHERE NOT EXISTS (SELECT FROM seen)
        )
        SELECT coalesce((SELECT first_seen_at FROM seen), now())
               > now() - make_interval(secs => $1)
        "#,
    )
    .bind(crate::store::workers::RESTART_GRACE.as_secs_f64())
    .fetch_one(tx)
    .await
    .context("asking whether the database restarted")
}

/// `running → ready (next attempt) | retrying | failed | killed` for attempts still running under
/// `worker` that it gives up, as `why` says (see [`Release`]). Returns how many moved.
pub async fn release_attempts(
    store: &Store,
    topology: &Topology,
    worker: &WorkerIdentity,
    attempts: &[(Uuid, i32)],
    why: Release,
) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let (rerun, error) = match why {
        Release::Interrupted => (false, "interrupted: its worker stopped before it ended"),
        Release::NeverRan => (true, "its worker never ran it"),
    };
    let moved =
        close_lost_attempts(&mut tx, topology, attempts, Some(worker.id), rerun, error).await?;
    commit(store, tx, "committing released attempts").await?;
    Ok(moved)
}

/// The one transition of a lost attempt, in the caller's transaction: closes each attempt (if it
/// is still running, under `worker` when given) as `lost` with `error`, and moves its task to
/// `killed` (kill requested), `ready` as the next attempt (`requests_recovery`, or `rerun`),
/// `retrying` (failed budget left) or `failed`, reason `lost`; events and re-run messages go to
/// the outbox.
async fn close_lost_attempts(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    attempts: &[(Uuid, i32)],
    worker: Option<Uuid>,
    rerun: bool,
    error: &str,
) -> Result<usize, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Recovered {
        #[sqlx(flatten)]
        parts: MessageParts,
        status: String,
    }
    if attempts.is_empty() {
        return Ok(0);
    }
    let (ids, numbers): (Vec<Uuid>, Vec<i32>) = attempts.iter().copied().unzip();
    let recovered: Vec<Recovered> = sqlx::query_as(
        r#"
        WITH lost AS (
            SELECT t.id, t.attempt, t.worker_id, t.started_at, CASE
                WHEN t.kill_requested_at IS NOT NULL THEN 'killed'
                WHEN t.requests_recovery OR $4 THEN 'ready'
                WHEN t.failures < t.failed_retries THEN 'retrying'
                ELSE 'failed' END AS next_status
            FROM tasks t JOIN UNNEST($1::uuid[], $2::int[]) AS c(id, attempt)
                ON t.id = c.id AND t.attempt = c.attempt
            WHERE t.status = 'running' AND ($3::uuid IS NULL OR t.worker_id = $3)
            FOR UPDATE OF t
        ), closed AS (
            -- the attempt's row, written now unless it printed while it ran
            INSERT INTO task_attempts AS a (task_id, attempt, worker_id, worker_name, started_at,
                                            outcome, finished_at, error)
            SELECT lost.id, lost.attempt, lost.worker_id, w.name,
                   coalesce(lost.started_at, now()), 'lost', now(), $5
            FROM lost LEFT JOIN workers w ON w.id = lost.worker_id
            ON CONFLICT (task_id, attempt) DO UPDATE
                SET outcome = 'lost', finished_at = now(), error = $5
        ), moved AS (
            UPDATE tasks t SET
                status = lost.next_status,
                attempt = t.attempt + (lost.next_status = 'ready')::int,
                failures = t.failures + (lost.next_status IN ('retrying', 'failed'))::int,
                worker_id = NULL,
                started_at = CASE WHEN lost.next_status = 'ready' THEN NULL ELSE t.started_at END,
                ready_at = CASE WHEN lost.next_status = 'ready' THEN now() ELSE t.ready_at END,
                republished_at = NULL,
                next_attempt_at = CASE WHEN lost.next_status = 'retrying' THEN
                    now() + retry_delay(t.backoff, t.failed_interval_ms, t.failures + 1) END,
                finished_at = CASE WHEN lost.next_status IN ('failed', 'killed') THEN now() END,
                reason = CASE lost.next_status WHEN 'killed' THEN 'killed' ELSE 'lost' END,
                result = jsonb_build_object('error', $5::text, 'output', '')
            FROM lost WHERE t.id = lost.id
            RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                      t.timeout_ms, t.execute_user, t.job_id, t.status, t.reason
        ), unblocked AS (
            UPDATE triggers SET state = 'waiting'
            FROM moved
            WHERE triggers.job_id = moved.job_id AND triggers.state = 'blocked'
              AND moved.status IN ('failed', 'killed')
        ), events AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $6, 'task.' || status || '.' || worker_group,
                   task_event(id, attempt, status, worker_group, job_id, data_time, reason, now())
            FROM moved
        )
        SELECT id, attempt, kind, spec, worker_group, data, data_time, timeout_ms, execute_user,
               status
        FROM moved
        "#,
    )
    .bind(&ids)
    .bind(&numbers)
    .bind(worker)
    .bind(rerun)
    .bind(error)
    .bind(topology.events_exchange())
    .fetch_all(&mut *tx)
    .await
    .context("recovering lost attempts")?;
    let reruns: Vec<TaskMessage> = recovered
        .iter()
        .filter(|r| r.status == "ready")
        .map(|r| r.parts.message(r.parts.attempt))
        .collect();
    enqueue_task_messages(&mut *tx, topology, &reruns).await?;
    Ok(recovered.len())
}

/// Publishes again the message of `ready` tasks that no worker has started for `older_than`
/// (since they became ready, or since their last re-publish), in the task queues given (a group,
/// and whether its inline queue: [`StaleQueue`]): the database is the truth, so a task message
/// lost on the bus (dead-lettered during an outage, or dropped with its queue) cannot strand a
/// task. The caller names only queues that hold no message, so a backlog is not doubled. A duplicate is harmless: the attempt starts once. Returns how many
/// were re-published.
///
/// `only_recovered` limits it to tasks that recovery made ready (reason `lost`), which are worth
/// a much shorter `older_than`: their message may sit unacknowledged in the consumer of the
/// frozen worker they were taken from, which the broker believes alive until its connection
/// times out.
pub async fn republish_stale_ready(
    store: &Store,
    topology: &Topology,
    queues: &[StaleQueue],
    older_than: std::time::Duration,
    only_recovered: bool,
    limit: i64,
) -> Result<usize, StoreError> {
    let groups: Vec<&str> = queues.iter().map(|q| q.group.as_str()).collect();
    let inline: Vec<bool> = queues.iter().map(|q| q.inline).collect();
    let mut tx = store.begin().await?;
    let stale: Vec<MessageParts> = sqlx::query_as(
        r#"
        UPDATE tasks t SET republished_at = now(), worker_id = NULL
        FROM (
            SELECT id FROM tasks
            WHERE status = 'ready' AND worker_group = ANY($1)
              AND (worker_group, kind = ANY($6)) IN (SELECT * FROM UNNEST($1::text[], $5::bool[]))
              AND coalesce(republished_at, ready_at, created_at)
                  < now() - make_interval(secs => $2)
              AND (NOT $4 OR reason = 'lost')
            ORDER BY id
            LIMIT $3
            FOR UPDATE SKIP LOCKED
        ) s
        WHERE t.id = s.id
        RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                  t.timeout_ms, t.execute_user
        "#,
    )
    .bind(&groups)
    .bind(older_than.as_secs_f64())
    .bind(limit)
    .bind(only_recovered)
    .bind(&inline)
    .bind(&INLINE_KINDS[..])
    .fetch_all(&mut *tx)
    .await
    .context("finding ready tasks no worker started")?;
    enqueue_current_attempts(&mut tx, topology, &stale).await?;
    commit(store, tx, "committing re-published messages").await?;
    Ok(stale.len())
}

/// One task queue of a worker group: its process queue, or its inline one (noop, http).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StaleQueue {
    /// The worker group.
    pub group: String,
    /// Whether it is the group's inline queue.
    pub inline: bool,
}

/// The task queues that should hold `ready` tasks no worker has started for `older_than` (only
/// those recovery made ready, with `only_recovered`).
pub async fn queues_with_stale_ready(
    store: &Store,
    older_than: std::time::Duration,
    only_recovered: bool,
) -> Result<Vec<StaleQueue>, StoreError> {
    sqlx::query_as(
        "SELECT DISTINCT worker_group AS \"group\", kind = ANY($3) AS inline FROM tasks
         WHERE status = 'ready'
           AND coalesce(republished_at, ready_at, created_at) < now() - make_interval(secs => $1)
           AND (NOT $2 OR reason = 'lost')",
    )
    .bind(older_than.as_secs_f64())
    .bind(only_recovered)
    .bind(&INLINE_KINDS[..])
    .fetch_all(store.pool())
    .await
    .context("finding task queues with stale ready tasks")
}
