//! What an operator asks for: kill a task, or run an ended one again.

use uuid::Uuid;

use super::{MessageParts, commit, enqueue_task_messages};
use crate::bus::Topology;
use crate::model::{TaskMessage, TaskStatus};
use crate::store::{Context, Store, StoreError};

/// What [`kill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The task was waiting, ready or retrying: it is `killed` now.
    Killed,
    /// The task is running: its worker was told (through the control exchange) to kill it; the
    /// worker records `killed` when the process is gone.
    Signalled,
    /// The task had already ended (its status is returned); nothing changed.
    AlreadyEnded(TaskStatus),
}

/// Kills a task: `waiting | ready | retrying → killed` in the database alone (a `ready` task's
/// message, if already published, is dropped by the worker because the attempt is no longer
/// ready); a `running` task gets its kill request recorded and a kill command for its worker in
/// the outbox, in the same statement.
pub async fn kill(
    store: &Store,
    topology: &Topology,
    task_id: Uuid,
) -> Result<KillOutcome, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Killed {
        before: String,
        after: String,
    }
    let row: Option<Killed> = sqlx::query_as(kill_statement!(
        "id = $1",
        " SELECT c.before, coalesce(m.status, c.before) AS after
          FROM current c LEFT JOIN moved m ON m.id = c.id"
    ))
    .bind(task_id)
    .bind(topology.events_exchange())
    .bind(topology.control_exchange())
    .fetch_optional(store.pool())
    .await
    .context("killing the task")?;
    store.outbox_written();
    let row = row.ok_or(StoreError::TaskNotFound(task_id))?;
    let status = |s: &str| {
        s.parse::<TaskStatus>().map_err(|e| StoreError::Database {
            context: "reading a task's status",
            source: sqlx::Error::Decode(Box::new(e)),
        })
    };
    Ok(match (status(&row.before)?, status(&row.after)?) {
        (TaskStatus::Running, TaskStatus::Running) => KillOutcome::Signalled,
        (_, TaskStatus::Killed) if row.before != "killed" => KillOutcome::Killed,
        (before, _) => KillOutcome::AlreadyEnded(before),
    })
}

/// `failed | killed | succeeded → ready` as a new attempt (`chime task rerun`): budgets start
/// again; its success advances downstream tasks still waiting for it. In the same transaction,
/// every task downstream of it for the data times it feeds (through the whole DAG) that failed
/// `upstream_failed` goes back to `waiting`, so the chain runs again as its upstreams succeed;
/// with `downstream`, so does every downstream task that had ended, whatever its end (Airflow's
/// Clear → Downstream). Returns the downstream tasks made to wait again.
///
/// ```text
///   up (failed) ──rerun──▶ ready
///   down1, down2 (failed, upstream_failed) ──▶ waiting ──(up succeeds, then down1)──▶ ready
/// ```
pub async fn rerun(
    store: &Store,
    topology: &Topology,
    task_id: Uuid,
    downstream: bool,
    may_run_as: &MayRunAs<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    retrying_deadlocks(|| rerun_once(store, topology, task_id, downstream, may_run_as)).await
}

/// Runs `once` again (up to [`DEADLOCK_RETRIES`] times) while PostgreSQL ends it to break a
/// deadlock.
async fn retrying_deadlocks<T, F, Fut>(mut once: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut tries = 0;
    loop {
        match once().await {
            Err(error) if error.is_deadlock() && tries < DEADLOCK_RETRIES => tries += 1,
            done => return done,
        }
    }
}

/// How often a rerun that lost a deadlock is tried again. Operator reruns wait for each other
/// ([`RERUN_LOCK`]), but a rerun's cascade still meets the dependency service's advances, which
/// lock the same rows in the DAG's order.
const DEADLOCK_RETRIES: u32 = 3;

/// The advisory lock operator reruns take in turn: two bulk reruns over one DAG would otherwise
/// lock its tasks in opposite orders.
const RERUN_LOCK: i64 = 0x6368_696d_6572_756e; // "chimerun"

async fn rerun_once(
    store: &Store,
    topology: &Topology,
    task_id: Uuid,
    downstream: bool,
    may_run_as: &MayRunAs<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    let mut tx = store.begin().await?;
    take_rerun_lock(&mut tx).await?;
    let current: Option<String> =
        sqlx::query_scalar("SELECT status FROM tasks WHERE id = $1 FOR UPDATE")
            .bind(task_id)
            .fetch_optional(&mut *tx)
            .await
            .context("reading the task")?;
    let current = current.ok_or(StoreError::TaskNotFound(task_id))?;
    if !matches!(current.as_str(), "failed" | "killed" | "succeeded") {
        return Err(StoreError::Conflict(format!(
            "task {task_id} is {current}: only a task that has ended can be re-run"
        )));
    }
    let reopened = rerun_in(&mut tx, topology, &[task_id], downstream, may_run_as).await?;
    commit(store, tx, "committing the rerun").await?;
    Ok(reopened)
}

/// Whether the caller may have commands run as an OS user (`None`: the worker's default user);
/// the reason it may not.
pub type MayRunAs<'a> = dyn Fn(Option<&str>) -> Result<(), String> + Send + Sync + 'a;

fn check_user(may_run_as: &MayRunAs<'_>, user: Option<&str>, task: Uuid) -> Result<(), StoreError> {
    may_run_as(user).map_err(|why| StoreError::Forbidden(format!("task {task}: {why}")))
}

/// Which tasks of one job a bulk rerun or kill picks.
#[derive(Debug, Clone, Default)]
pub struct JobTasks {
    /// The job.
    pub job_id: i64,
    /// Only tasks in these statuses (None: every status the action applies to).
    pub statuses: Option<Vec<String>>,
    /// Only data times at or after this.
    pub data_time_from: Option<jiff::Timestamp>,
    /// Only data times at or before this.
    pub data_time_to: Option<jiff::Timestamp>,
}

/// What a bulk rerun or kill did (or, dry, would do).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct BulkOutcome {
    /// The job's tasks it re-ran or killed (a running one: its kill was asked for).
    pub tasks: Vec<Uuid>,
    /// For a rerun: the downstream tasks made to wait again.
    pub downstream_waiting: Vec<Uuid>,
    /// Nothing was written: this is what it would do.
    pub dry_run: bool,
}

/// [`rerun`] for every ended task of a job that `pick` selects (failed, killed or succeeded;
/// `statuses` narrows it), in one transaction; `dry_run` rolls it back and reports.
pub async fn rerun_job_tasks(
    store: &Store,
    topology: &Topology,
    pick: &JobTasks,
    downstream: bool,
    dry_run: bool,
    may_run_as: &MayRunAs<'_>,
) -> Result<BulkOutcome, StoreError> {
    retrying_deadlocks(|| {
        rerun_job_tasks_once(store, topology, pick, downstream, dry_run, may_run_as)
    })
    .await
}

/// Waits for the reruns before this one, 5 s at most: a caller (an API request holding one of
/// its pool's connections) is told to try again rather than queue behind a long cascade.
async fn take_rerun_lock(tx: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    sqlx::query("SET LOCAL lock_timeout = '5s'")
        .execute(&mut *tx)
        .await
        .context("bounding the wait for other reruns")?;
    match sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(RERUN_LOCK)
        .execute(&mut *tx)
        .await
    {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => Err(
            StoreError::Conflict("another rerun is still running; try again in a moment".into()),
        ),
        Err(e) => Err(e).context("waiting for other reruns"),
    }
}

async fn rerun_job_tasks_once(
    store: &Store,
    topology: &Topology,
    pick: &JobTasks,
    downstream: bool,
    dry_run: bool,
    may_run_as: &MayRunAs<'_>,
) -> Result<BulkOutcome, StoreError> {
    let mut tx = store.begin().await?;
    take_rerun_lock(&mut tx).await?;
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM tasks
         WHERE job_id = $1 AND status IN ('failed', 'killed', 'succeeded')
           AND ($2::text[] IS NULL OR status = ANY ($2))
           AND ($3::timestamptz IS NULL OR data_time >= $3)
           AND ($4::timestamptz IS NULL OR data_time <= $4)
         ORDER BY data_time, id
         FOR UPDATE",
    )
    .bind(pick.job_id)
    .bind(pick.statuses.as_deref())
    .bind(pick.data_time_from.map(jiff_sqlx::Timestamp::from))
    .bind(pick.data_time_to.map(jiff_sqlx::Timestamp::from))
    .fetch_all(&mut *tx)
    .await
    .context("picking the job's tasks to re-run")?;
    // A job that runs one task at a time (Quartz's DisallowConcurrentExecution) would have them
    // overlap: a backfill runs a range of its data times one after another instead.
    let (concurrent, live): (bool, i64) = sqlx::query_as(
        "SELECT j.concurrent,
                (SELECT count(*) FROM tasks t
                 WHERE t.job_id = j.id AND t.status IN ('ready', 'running', 'retrying'))
         FROM jobs j WHERE j.id = $1",
    )
    .bind(pick.job_id)
    .fetch_optional(&mut *tx)
    .await
    .context("reading whether the job runs one task at a time")?
    .unwrap_or((true, 0));
    if !concurrent && ids.len() as i64 + live > 1 {
        return Err(StoreError::Conflict(format!(
            "the job runs one task at a time (concurrent = false): re-running {} of its tasks \
             with {live} live would overlap them; re-run them one by one, or run the range as a \
             backfill with --parallelism 1",
            ids.len()
        )));
    }
    let mut downstream_waiting = rerun_in(&mut tx, topology, &ids, downstream, may_run_as).await?;
    // A task of the job that is also downstream of another picked one is re-run, not waiting.
    downstream_waiting.retain(|id| !ids.contains(id));
    if dry_run {
        tx.rollback().await.context("rolling back the dry run")?;
    } else {
        commit(store, tx, "committing the reruns").await?;
    }
    Ok(BulkOutcome {
        tasks: ids,
        downstream_waiting,
        dry_run,
    })
}

/// [`kill`] for every task of a job that `pick` selects and that has not ended (waiting, ready,
/// retrying or running; `statuses` narrows it), in one statement; `dry_run` rolls it back and
/// reports.
pub async fn kill_job_tasks(
    store: &Store,
    topology: &Topology,
    pick: &JobTasks,
    dry_run: bool,
) -> Result<BulkOutcome, StoreError> {
    let mut tx = store.begin().await?;
    let ids: Vec<Uuid> = sqlx::query_scalar(kill_statement!(
        "job_id = $1 AND status IN ('waiting', 'ready', 'retrying', 'running')
           AND ($4::text[] IS NULL OR status = ANY ($4))
           AND ($5::timestamptz IS NULL OR data_time >= $5)
           AND ($6::timestamptz IS NULL OR data_time <= $6)",
        " SELECT id FROM moved ORDER BY data_time, id"
    ))
    .bind(pick.job_id)
    .bind(topology.events_exchange())
    .bind(topology.control_exchange())
    .bind(pick.statuses.as_deref())
    .bind(pick.data_time_from.map(jiff_sqlx::Timestamp::from))
    .bind(pick.data_time_to.map(jiff_sqlx::Timestamp::from))
    .fetch_all(&mut *tx)
    .await
    .context("killing the job's tasks")?;
    if dry_run {
        tx.rollback().await.context("rolling back the dry run")?;
    } else {
        commit(store, tx, "committing the kills").await?;
    }
    Ok(BulkOutcome {
        tasks: ids,
        downstream_waiting: Vec::new(),
        dry_run,
    })
}

/// The rerun transition of ended tasks `ids` (locked by the caller), in the caller's
/// transaction: each `ready` as its next attempt with its message in the outbox, then the
/// downstream tasks of each reopened (see [`reopen_downstream`]). Returns those.
async fn rerun_in(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    ids: &[Uuid],
    downstream: bool,
    may_run_as: &MayRunAs<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        parts: MessageParts,
        job_id: Option<i64>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        r#"
        UPDATE tasks SET status = 'ready', attempt = attempt + 1, rejects = 0, failures = 0,
               ready_at = now(), started_at = NULL, finished_at = NULL,
               next_attempt_at = NULL, worker_id = NULL, kill_requested_at = NULL,
               reason = NULL, result = NULL
        WHERE id = ANY ($1) AND status IN ('failed', 'killed', 'succeeded')
        RETURNING id, attempt, kind, spec, worker_group, data, data_time, timeout_ms,
                  execute_user, job_id
        "#,
    )
    .bind(ids)
    .fetch_all(&mut *tx)
    .await
    .context("re-running tasks")?;
    // Each task runs as the user it was made with, whatever its job says now: that is the user
    // the caller must be allowed. A refusal returns before the commit, so nothing changes.
    for row in &rows {
        check_user(may_run_as, row.parts.execute_user.as_deref(), row.parts.id)?;
    }
    let messages: Vec<TaskMessage> = rows
        .iter()
        .map(|r| r.parts.message(r.parts.attempt))
        .collect();
    enqueue_task_messages(&mut *tx, topology, &messages).await?;
    let mut reopened = Vec::new();
    for row in &rows {
        if let (Some(job_id), Some(data_time)) = (row.job_id, row.parts.data_time) {
            reopened.extend(
                reopen_downstream(
                    &mut *tx,
                    topology,
                    job_id,
                    data_time.to_jiff(),
                    downstream,
                    may_run_as,
                )
                .await?,
            );
        }
    }
    Ok(reopened)
}

/// `failed (upstream_failed) → waiting` (and with `all_ended`, `succeeded | failed | killed →
/// waiting`) for the tasks downstream of job `job_id`'s run for `data_time`, level by level
/// through the DAG, in the caller's transaction. Each (job, data time) reopened forgets its
/// dependency advance, so the dependency service advances it again; a task that had run counts
/// its next run as a new attempt. A backfill's downstream tasks come back as any others; the
/// backfill's own tasks are its to run (`awaits_backfill_turn`), and are not downstream of it.
async fn reopen_downstream(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    job_id: i64,
    data_time: jiff::Timestamp,
    all_ended: bool,
    may_run_as: &MayRunAs<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    use std::collections::BTreeSet;
    let mut seen: BTreeSet<(i64, jiff::Timestamp)> = BTreeSet::new();
    let mut frontier = vec![(job_id, data_time)];
    let mut reopened = Vec::new();
    // A DAG has no cycle (a dependency making one is refused), and `seen` bounds the walk anyway.
    while let Some((upstream, at)) = frontier.pop() {
        let downstreams: Vec<crate::store::dependencies::Downstream> = sqlx::query_as(
            r#"SELECT d.job_id, d."window",
                      period_in_zone(j.data_time_period, j.data_time_zone) AS data_time_period
               FROM job_dependencies d JOIN jobs j ON j.id = d.job_id
               WHERE d.depends_on_job_id = $1"#,
        )
        .bind(upstream)
        .fetch_all(&mut *tx)
        .await
        .context("listing downstream jobs")?;
        for down in downstreams {
            let their_time = down.data_time_for(at);
            if !seen.insert((down.job_id, their_time)) {
                continue;
            }
            let moved: Vec<(Uuid, Option<String>)> = sqlx::query_as(
                r#"
                WITH moved AS (
                    UPDATE tasks t SET status = 'waiting',
                           attempt = t.attempt + CASE WHEN EXISTS (
                               SELECT 1 FROM task_attempts a
                               WHERE a.task_id = t.id AND a.attempt = t.attempt) THEN 1 ELSE 0 END,
                           rejects = 0, failures = 0, ready_at = NULL, started_at = NULL,
                           finished_at = NULL, next_attempt_at = NULL, worker_id = NULL,
                           kill_requested_at = NULL, reason = NULL, result = NULL
                    WHERE t.job_id = $1 AND t.data_time = $2
                      AND NOT awaits_backfill_turn(t.backfill_id, t.job_id)
                      AND ((t.status = 'failed' AND t.reason = 'upstream_failed')
                           OR ($3 AND t.status IN ('succeeded', 'failed', 'killed')))
                    RETURNING t.id, t.attempt, t.worker_group, t.job_id, t.data_time,
                              t.execute_user
                ), forgotten AS (
                    DELETE FROM dependency_advances
                    WHERE job_id = $1 AND data_time = $2 AND EXISTS (SELECT 1 FROM moved)
                ), told AS (
                    INSERT INTO outbox (exchange, routing_key, body)
                    SELECT $4, 'task.waiting.' || worker_group,
                           task_event(id, attempt, 'waiting', worker_group, job_id, data_time,
                                      NULL, now())
                    FROM moved
                )
                SELECT id, execute_user FROM moved
                "#,
            )
            .bind(down.job_id)
            .bind(jiff_sqlx::Timestamp::from(their_time))
            .bind(all_ended)
            .bind(topology.events_exchange())
            .fetch_all(&mut *tx)
            .await
            .context("reopening downstream tasks")?;
            for (id, user) in &moved {
                check_user(may_run_as, user.as_deref(), *id)?;
            }
            reopened.extend(moved.into_iter().map(|(id, _)| id));
            frontier.push((down.job_id, their_time));
        }
    }
    Ok(reopened)
}
