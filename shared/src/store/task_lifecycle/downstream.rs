//! Where a task waits for others: `waiting → ready | failed` as its upstreams succeed or fail,
//! and backfills, whose tasks are made `waiting` and promoted a few at a time.

use uuid::Uuid;

use super::{MessageParts, commit, enqueue_current_attempts};
use crate::bus::Topology;
use crate::store::{Context, Store, StoreError};

/// What [`advance_dependent`] did for a (job, data time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advanced {
    /// Its waiting task became ready, or a ready task was created for it.
    Ready(Uuid),
    /// Its waiting task failed (`upstream_failed`), or a failed task was recorded for it.
    Failed(Uuid),
    /// It had been advanced before (a duplicate event, or another dependency service).
    AlreadyDone,
    /// Nothing to move: no waiting task, and the job makes its own (its trigger has not fired
    /// for that data time yet), or a task for it exists already.
    NothingToMove,
}

/// How a dependency advance was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyOutcome {
    /// Every upstream run succeeded.
    Met,
    /// An upstream failed for good under the `fail` policy.
    UpstreamFailed,
}

/// `waiting → ready | failed` for job `job_id`'s task for `data_time`, once per (job, data time)
/// (the `dependency_advances` key, taken in the same transaction): `Met` makes the waiting task
/// ready with its message in the outbox; `UpstreamFailed` fails it with reason `upstream_failed`
/// and its event (which the dependency service hears, so the failure propagates). Without a
/// waiting task, a job with no trigger of its own (or a downstream of a backfill made
/// `with_downstream`, given as `lineage`) gets a task created for the data time.
pub async fn advance_dependent(
    store: &Store,
    topology: &Topology,
    job_id: i64,
    data_time: jiff::Timestamp,
    outcome: DependencyOutcome,
    lineage: Option<(i64, bool)>,
) -> Result<Advanced, StoreError> {
    let mut tx = store.begin().await?;
    lock_run(&mut tx, job_id, data_time).await?;
    let label = match outcome {
        DependencyOutcome::Met => "ready",
        DependencyOutcome::UpstreamFailed => "failed",
    };
    let first: Option<i64> = sqlx::query_scalar(
        "INSERT INTO dependency_advances (job_id, data_time, outcome) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING RETURNING job_id",
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(data_time))
    .bind(label)
    .fetch_optional(&mut *tx)
    .await
    .context("recording the advance")?;
    let (new_status, reason) = match outcome {
        DependencyOutcome::Met => ("ready", None),
        DependencyOutcome::UpstreamFailed => ("failed", Some("upstream_failed")),
    };
    let moved: Vec<MessageParts> = sqlx::query_as(
        r#"
        UPDATE tasks SET status = $3, ready_at = CASE WHEN $3 = 'ready' THEN now() END,
               finished_at = CASE WHEN $3 = 'failed' THEN now() END, reason = $4
        WHERE job_id = $1 AND data_time = $2 AND status = 'waiting'
          AND NOT awaits_backfill_turn(backfill_id, job_id)
        RETURNING id, attempt, kind, spec, worker_group, data, data_time, timeout_ms, execute_user
        "#,
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(data_time))
    .bind(new_status)
    .bind(reason)
    .fetch_all(&mut *tx)
    .await
    .context("advancing the waiting task")?;
    // Every waiting task of the job for D moves (a job whose trigger fires more often than its
    // data-time period has several). One made after (job, D) advanced — a second trigger, or a
    // trigger firing again within the period — moves the same way: it must not wait for an event
    // that already happened. Creating a task is for the first advance only.
    let tasks: Vec<MessageParts> = match (moved.is_empty(), first.is_some()) {
        (false, _) => moved,
        (true, false) => return Ok(Advanced::AlreadyDone),
        (true, true) => {
            // No waiting task: create one if the job does not make its own, and no task exists.
            let backfill = lineage.map(|(id, _)| id);
            let with_downstream = lineage.is_some_and(|(_, w)| w);
            let created: Option<MessageParts> = sqlx::query_as(
                r#"
                INSERT INTO tasks (id, job_id, kind, spec, worker_group, priority, status,
                                   attempt, reject_retries, reject_interval_ms, failed_retries,
                                   failed_interval_ms, backoff, timeout_ms, requests_recovery,
                                   data_time, data, submit_user, execute_user, ready_at,
                                   finished_at, reason, backfill_id)
                SELECT $1, j.id, j.kind, j.spec, j.worker_group, j.priority, $4, 1,
                       j.reject_retries, j.reject_interval_ms, j.failed_retries,
                       j.failed_interval_ms, j.backoff, j.timeout_ms, j.requests_recovery, $3,
                       j.data, j.submit_user, j.execute_user,
                       CASE WHEN $4 = 'ready' THEN now() END,
                       CASE WHEN $4 = 'failed' THEN now() END, $5, $6
                FROM jobs j
                WHERE j.id = $2
                  AND ($7 OR NOT EXISTS (SELECT 1 FROM triggers t WHERE t.job_id = j.id))
                  AND NOT EXISTS (SELECT 1 FROM tasks x WHERE x.job_id = j.id AND x.data_time = $3)
                RETURNING id, attempt, kind, spec, worker_group, data, data_time, timeout_ms,
                          execute_user
                "#,
            )
            .bind(Uuid::now_v7())
            .bind(job_id)
            .bind(jiff_sqlx::Timestamp::from(data_time))
            .bind(new_status)
            .bind(reason)
            .bind(backfill)
            .bind(with_downstream)
            .fetch_optional(&mut *tx)
            .await
            .context("creating the downstream task")?;
            match created {
                Some(task) => vec![task],
                // Leave no advance record: the job's own trigger will make the task later.
                None => return Ok(Advanced::NothingToMove),
            }
        }
    };
    let ids: Vec<Uuid> = tasks.iter().map(|t| t.id).collect();
    match outcome {
        DependencyOutcome::Met => {
            enqueue_current_attempts(&mut tx, topology, &tasks).await?;
        }
        DependencyOutcome::UpstreamFailed => {
            sqlx::query(
                r#"INSERT INTO outbox (exchange, routing_key, body)
                   SELECT $1, 'task.failed.' || worker_group,
                          task_event(id, attempt, 'failed', worker_group, job_id, data_time,
                                     'upstream_failed', now())
                   FROM tasks WHERE id = ANY($2)"#,
            )
            .bind(topology.events_exchange())
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .context("writing the failures' events")?;
        }
    }
    let task = &tasks[0];
    sqlx::query(
        "UPDATE dependency_advances SET task_id = coalesce(task_id, $3)
         WHERE job_id = $1 AND data_time = $2",
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(data_time))
    .bind(task.id)
    .execute(&mut *tx)
    .await
    .context("recording the advanced task")?;
    commit(store, tx, "committing the advance").await?;
    Ok(match outcome {
        DependencyOutcome::Met => Advanced::Ready(task.id),
        DependencyOutcome::UpstreamFailed => Advanced::Failed(task.id),
    })
}

/// `(nothing) → waiting` for a backfill's tasks, one per data time, then the first
/// `parallelism` of them `ready` (see [`promote_backfill`]). Returns the backfill's id.
pub async fn create_backfill(
    store: &Store,
    topology: &Topology,
    job_id: i64,
    range: (jiff::Timestamp, jiff::Timestamp),
    parallelism: i32,
    with_downstream: bool,
    data_times: &[jiff::Timestamp],
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO backfills (job_id, from_time, to_time, parallelism, with_downstream)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(range.0))
    .bind(jiff_sqlx::Timestamp::from(range.1))
    .bind(parallelism)
    .bind(with_downstream)
    .fetch_one(&mut *tx)
    .await
    .context("recording the backfill")?;
    let ids: Vec<Uuid> = data_times.iter().map(|_| Uuid::now_v7()).collect();
    let times: Vec<jiff_sqlx::Timestamp> = data_times.iter().map(|t| (*t).into()).collect();
    sqlx::query(
        r#"
        INSERT INTO tasks (id, job_id, kind, spec, worker_group, priority, status, attempt,
                           reject_retries, reject_interval_ms, failed_retries, failed_interval_ms,
                           backoff, timeout_ms, requests_recovery, data_time, data, submit_user,
                           execute_user, backfill_id)
        SELECT b.id, j.id, j.kind, j.spec, j.worker_group, j.priority, 'waiting', 1,
               j.reject_retries, j.reject_interval_ms, j.failed_retries, j.failed_interval_ms,
               j.backoff, j.timeout_ms, j.requests_recovery, b.data_time, j.data, j.submit_user,
               j.execute_user, $4
        FROM UNNEST($1::uuid[], $2::timestamptz[]) AS b(id, data_time), jobs j
        WHERE j.id = $3
        "#,
    )
    .bind(&ids)
    .bind(&times)
    .bind(job_id)
    .bind(id)
    .execute(&mut *tx)
    .await
    .context("creating the backfill's tasks")?;
    promote_backfill_in(&mut tx, topology, id).await?;
    commit(store, tx, "committing the backfill").await?;
    Ok(id)
}

/// `waiting → ready` for a backfill's next tasks, by data time, so that at most its parallelism
/// are ready, running or retrying. Called when one of its tasks ends. Returns how many moved.
pub async fn promote_backfill(
    store: &Store,
    topology: &Topology,
    backfill_id: i64,
) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let promoted = promote_backfill_in(&mut tx, topology, backfill_id).await?;
    commit(store, tx, "committing the promotion").await?;
    Ok(promoted)
}

async fn promote_backfill_in(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    backfill_id: i64,
) -> Result<usize, StoreError> {
    // The backfill's row lock serialises promoters, so the parallelism holds; it is taken in a
    // statement of its own so that the count below sees what an earlier promoter committed.
    sqlx::query("SELECT 1 FROM backfills WHERE id = $1 FOR UPDATE")
        .bind(backfill_id)
        .execute(&mut *tx)
        .await
        .context("locking the backfill")?;
    let promoted: Vec<MessageParts> = sqlx::query_as(
        r#"
        WITH backfill AS (
            SELECT id, job_id, parallelism FROM backfills WHERE id = $1
        ), active AS (
            SELECT count(*) AS n FROM tasks t, backfill b
            WHERE t.backfill_id = b.id AND t.job_id = b.job_id
              AND t.status IN ('ready', 'running', 'retrying')
        ), next AS (
            SELECT t.id FROM tasks t, backfill b
            WHERE t.backfill_id = b.id AND t.job_id = b.job_id AND t.status = 'waiting'
            ORDER BY t.data_time
            LIMIT greatest(0, (SELECT parallelism FROM backfill) - (SELECT n FROM active))
        )
        UPDATE tasks t SET status = 'ready', ready_at = now()
        FROM next WHERE t.id = next.id AND t.status = 'waiting'
        RETURNING t.id, t.attempt, t.kind, t.spec, t.worker_group, t.data, t.data_time,
                  t.timeout_ms, t.execute_user
        "#,
    )
    .bind(backfill_id)
    .fetch_all(&mut *tx)
    .await
    .context("promoting backfill tasks")?;
    enqueue_current_attempts(&mut *tx, topology, &promoted).await?;
    Ok(promoted.len())
}

/// Kills every task of backfill `backfill_id` that has not ended (see [`kill`]); returns how many
/// were killed or signalled.
pub async fn kill_backfill(
    store: &Store,
    topology: &Topology,
    backfill_id: i64,
) -> Result<u64, StoreError> {
    let moved: i64 = sqlx::query_scalar(kill_statement!(
        "backfill_id = $1 AND status IN ('waiting', 'ready', 'retrying', 'running') ORDER BY id",
        " SELECT count(*) FROM moved"
    ))
    .bind(backfill_id)
    .bind(topology.events_exchange())
    .bind(topology.control_exchange())
    .fetch_one(store.pool())
    .await
    .context("cancelling the backfill")?;
    store.outbox_written();
    Ok(moved.unsigned_abs())
}

/// `(nothing) → waiting` for job `job_id`'s run for `data_time`, when an upstream it needs has
/// failed under the `wait` policy and the job has no trigger of its own to make that task: the
/// blocked run then exists as a waiting task, which `chime task show` explains ("failed; waiting
/// for a rerun") and which the upstream's successful re-run advances. Returns the task made, if
/// any (none when a task, or an advance, exists for that data time already).
pub async fn record_blocked(
    store: &Store,
    topology: &Topology,
    job_id: i64,
    data_time: jiff::Timestamp,
) -> Result<Option<Uuid>, StoreError> {
    let mut tx = store.begin().await?;
    lock_run(&mut tx, job_id, data_time).await?;
    let made: Option<Uuid> = sqlx::query_scalar(
        r#"
        WITH task AS (
            INSERT INTO tasks (id, job_id, kind, spec, worker_group, priority, status, attempt,
                               reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user)
            SELECT $1, j.id, j.kind, j.spec, j.worker_group, j.priority, 'waiting', 1,
                   j.reject_retries, j.reject_interval_ms, j.failed_retries,
                   j.failed_interval_ms, j.backoff, j.timeout_ms, j.requests_recovery, $3,
                   j.data, j.submit_user, j.execute_user
            FROM jobs j
            WHERE j.id = $2
              AND NOT EXISTS (SELECT 1 FROM triggers t WHERE t.job_id = j.id)
              AND NOT EXISTS (SELECT 1 FROM tasks x WHERE x.job_id = j.id AND x.data_time = $3)
              AND NOT EXISTS (SELECT 1 FROM dependency_advances a
                              WHERE a.job_id = j.id AND a.data_time = $3)
            RETURNING id, worker_group, job_id, data_time
        ), told AS (
            INSERT INTO outbox (exchange, routing_key, body)
            SELECT $4, 'task.waiting.' || worker_group,
                   task_event(id, 1, 'waiting', worker_group, job_id, data_time, NULL, now())
            FROM task
        )
        SELECT id FROM task
        "#,
    )
    .bind(Uuid::now_v7())
    .bind(job_id)
    .bind(jiff_sqlx::Timestamp::from(data_time))
    .bind(topology.events_exchange())
    .fetch_optional(&mut *tx)
    .await
    .context("recording the blocked run")?;
    commit(store, tx, "committing the blocked run").await?;
    Ok(made)
}

/// Serialises what decides a (job, data time)'s run in the dependency service: advancing it and
/// recording it blocked. Without it, a blocked run recorded while its upstream's re-run advances
/// it (neither sees the other's uncommitted task) would make a second task for the data time.
async fn lock_run(
    tx: &mut sqlx::PgConnection,
    job_id: i64,
    data_time: jiff::Timestamp,
) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(i32::try_from(job_id % i64::from(i32::MAX)).unwrap_or_default())
        .bind(data_time.to_string())
        .execute(tx)
        .await
        .context("taking the run's lock")?;
    Ok(())
}
