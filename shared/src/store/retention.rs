//! History that does not grow for ever: ended tasks (with their attempts, by cascade),
//! fired-trigger rows and ended webhook deliveries older than the retention period are removed
//! in small batches.
//!
//! What is never touched: a task that has not ended; an ended upstream run that a waiting
//! downstream task still needs (one whose data time is in that task's dependency window; a dry
//! run names each waiting task and what it keeps); a fired-trigger row that is `blocked` or whose
//! task still lives. Each batch is its own short transaction under a transaction-level advisory
//! lock, so one instance prunes at a time and no lock outlives a batch. Age is the time a task
//! was made (`created_at`, on the creation index the lists walk too), never its id, which a
//! caller may have chosen.
//!
//! Two cuts: `chime prune --older-than` removes everything ended before its cut ([`prune`]); the
//! hourly pass keeps each task for its job's `retention_days`, else the installation's
//! ([`prune_by_policy`]).

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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PruneReport {
    /// Ended tasks (their attempts went with them).
    pub tasks: i64,
    /// Fired-trigger rows.
    pub fired_triggers: i64,
    /// Webhook deliveries delivered or given up.
    #[serde(default)]
    pub webhook_deliveries: i64,
    /// Whether another instance was pruning (this one stopped).
    pub busy: bool,
    /// For a dry run: the ended tasks past the cut that are kept because a waiting task needs
    /// them, by waiting task (at most [`KEPT_SHOWN`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<KeptForWaiting>,
}

/// How many waiting tasks a dry run names.
pub const KEPT_SHOWN: i64 = 20;

/// Ended upstream runs past a prune's cut that one waiting task still needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KeptForWaiting {
    /// The waiting task.
    pub task: Uuid,
    /// Its job, `group.name`.
    pub job: String,
    /// Its data time.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<Timestamp>,
    /// The upstream job whose runs it keeps, `group.name`.
    pub upstream: String,
    /// How many of that job's ended runs it keeps.
    pub tasks: i64,
}

const ENDED_TASKS: &str = "
    SELECT t.id FROM tasks t
    WHERE t.created_at < $1 AND t.status IN ('succeeded', 'failed', 'killed') AND {policy}
      AND NOT {needed}
    ORDER BY t.created_at, t.id LIMIT $2";

/// Whether ended task `t` is an upstream run a waiting task still needs: one of a downstream
/// job's waiting tasks has `t`'s data time in its dependency window (`in_dependency_window`,
/// migration 0019). A waiting task without a data time needs every run of its upstreams. The
/// bounds on `w.data_time` (wider than any period) let the waiting-tasks index find them.
const NEEDED: &str = "EXISTS (
          SELECT 1 FROM job_dependencies d
          JOIN jobs wj ON wj.id = d.job_id
          JOIN tasks w ON w.job_id = d.job_id AND w.status = 'waiting'
          WHERE d.depends_on_job_id = t.job_id
            AND (w.data_time IS NULL
                 OR (w.data_time > t.data_time - interval '32 days'
                     AND w.data_time < t.data_time + interval '32 days'
                     AND in_dependency_window(d.\"window\", wj.data_time_period,
                                              wj.data_time_zone, w.data_time, t.data_time))))";

/// Webhook deliveries that ended (delivered, or given up) and were made before `$1`.
const OLD_DELIVERIES: &str = "
    SELECT d.id FROM webhook_deliveries d
    WHERE d.created_at < $1 AND (d.delivered_at IS NOT NULL OR d.gave_up_at IS NOT NULL)
    ORDER BY d.created_at LIMIT $2";

const OLD_FIRES: &str = "
    SELECT f.id FROM fired_triggers f
    WHERE f.fired_time < $1 AND f.state <> 'blocked'
      AND NOT EXISTS (
          SELECT 1 FROM tasks t WHERE t.id = f.task_id
            AND t.status IN ('waiting', 'ready', 'running', 'retrying'))
    ORDER BY f.id LIMIT $2";

/// A task's own cut under the retention policy: its job's `retention_days`, else `$3` days.
const BY_POLICY: &str = "t.created_at < now() - make_interval(days => coalesce(
        (SELECT j.retention_days FROM jobs j WHERE j.id = t.job_id), $3::int))";

/// Removes what ended before `cut`, a batch at a time; with `dry_run`, counts it instead.
pub async fn prune(
    store: &Store,
    cut: Timestamp,
    dry_run: bool,
) -> Result<PruneReport, StoreError> {
    prune_tasks(store, cut, None, dry_run).await
}

/// The hourly pass: removes each ended task older than its job's `retention_days` (else
/// `default_days`), and fired-trigger rows older than `default_days`.
pub async fn prune_by_policy(store: &Store, default_days: u32) -> Result<PruneReport, StoreError> {
    let shortest: Option<i32> =
        sqlx::query_scalar("SELECT min(retention_days) FROM jobs WHERE retention_days IS NOT NULL")
            .fetch_one(store.pool())
            .await
            .context("reading the jobs' retention")?;
    let default_days = i32::try_from(default_days).unwrap_or(i32::MAX);
    let days = shortest.map_or(default_days, |d| d.min(default_days));
    // Only tasks before the earliest cut any job has are candidates.
    let cut = Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_hours(24 * i64::from(days)))
        .unwrap_or(Timestamp::MIN);
    prune_tasks(store, cut, Some(default_days), false).await
}

async fn prune_tasks(
    store: &Store,
    cut: Timestamp,
    policy_days: Option<i32>,
    dry_run: bool,
) -> Result<PruneReport, StoreError> {
    let policy = if policy_days.is_some() {
        BY_POLICY
    } else {
        "true"
    };
    let ended_tasks = ENDED_TASKS
        .replace("{policy}", policy)
        .replace("{needed}", NEEDED);
    // Fired-trigger rows follow the installation's retention (or the manual cut).
    let fires_cut = policy_days.map_or(cut, |days| {
        Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_hours(24 * i64::from(days)))
            .unwrap_or(Timestamp::MIN)
    });
    let mut report = PruneReport::default();
    if dry_run {
        let (tasks, fires, deliveries): (i64, i64, i64) =
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT (SELECT count(*) FROM ({}) x), (SELECT count(*) FROM ({}) y),
                    (SELECT count(*) FROM ({}) z)",
                ended_tasks.replace("LIMIT $2", ""),
                OLD_FIRES.replace("$1", "$3").replace("LIMIT $2", ""),
                OLD_DELIVERIES.replace("$1", "$3").replace("LIMIT $2", "")
            )))
            .bind(jiff_sqlx::Timestamp::from(cut))
            .bind(0_i64)
            .bind(jiff_sqlx::Timestamp::from(fires_cut))
            .fetch_one(store.pool())
            .await
            .context("counting what a prune would remove")?;
        report.tasks = tasks;
        report.fired_triggers = fires;
        report.webhook_deliveries = deliveries;
        report.kept = kept_for_waiting(store, cut, &ended_tasks).await?;
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
        let delete = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM tasks WHERE id IN ({ended_tasks} FOR UPDATE OF t SKIP LOCKED)"
        )))
        .bind(jiff_sqlx::Timestamp::from(cut))
        .bind(BATCH);
        let delete = match policy_days {
            Some(days) => delete.bind(days),
            None => delete,
        };
        let tasks = delete
            .execute(&mut *tx)
            .await
            .context("pruning ended tasks")?
            .rows_affected();
        let fires = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM fired_triggers WHERE id IN ({OLD_FIRES} FOR UPDATE OF f SKIP LOCKED)"
        )))
        .bind(jiff_sqlx::Timestamp::from(fires_cut))
        .bind(BATCH)
        .execute(&mut *tx)
        .await
        .context("pruning fired-trigger rows")?
        .rows_affected();
        let deliveries = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM webhook_deliveries WHERE id IN ({OLD_DELIVERIES} FOR UPDATE OF d SKIP LOCKED)"
        )))
        .bind(jiff_sqlx::Timestamp::from(fires_cut))
        .bind(BATCH)
        .execute(&mut *tx)
        .await
        .context("pruning webhook deliveries")?
        .rows_affected();
        tx.commit().await.context("committing a prune batch")?;
        let deliveries = i64::try_from(deliveries).unwrap_or(i64::MAX);
        report.webhook_deliveries += deliveries;
        let (tasks, fires) = (
            i64::try_from(tasks).unwrap_or(i64::MAX),
            i64::try_from(fires).unwrap_or(i64::MAX),
        );
        report.tasks += tasks;
        report.fired_triggers += fires;
        metrics::counter!("chime_pruned_tasks_total").increment(tasks.unsigned_abs());
        if tasks < BATCH && fires < BATCH && deliveries < BATCH {
            return Ok(report);
        }
    }
}

/// The ended tasks past `cut` that waiting tasks keep, by waiting task and upstream job.
async fn kept_for_waiting(
    store: &Store,
    cut: Timestamp,
    ended_tasks: &str,
) -> Result<Vec<KeptForWaiting>, StoreError> {
    // The candidates are the prune's own, but for the one clause that keeps them.
    let candidates = ended_tasks
        .replace(&format!("AND NOT {NEEDED}"), "")
        .replace(
            "SELECT t.id FROM",
            "SELECT t.id, t.job_id, t.data_time FROM",
        )
        .replace("LIMIT $2", "");
    #[derive(sqlx::FromRow)]
    struct Row {
        task: Uuid,
        job: String,
        data_time: Option<jiff_sqlx::Timestamp>,
        upstream: String,
        tasks: i64,
    }
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        r#"SELECT w.id AS task, wj.group_name || '.' || wj.name AS job, w.data_time,
                  uj.group_name || '.' || uj.name AS upstream, count(*) AS tasks
           FROM ({candidates}) t
           JOIN jobs uj ON uj.id = t.job_id
           JOIN job_dependencies d ON d.depends_on_job_id = t.job_id
           JOIN jobs wj ON wj.id = d.job_id
           JOIN tasks w ON w.job_id = d.job_id AND w.status = 'waiting'
           WHERE w.data_time IS NULL
              OR in_dependency_window(d."window", wj.data_time_period, wj.data_time_zone,
                                      w.data_time, t.data_time)
           GROUP BY w.id, wj.group_name, wj.name, w.data_time, uj.group_name, uj.name
           ORDER BY count(*) DESC, w.id
           LIMIT $2"#
    )))
    .bind(jiff_sqlx::Timestamp::from(cut))
    .bind(KEPT_SHOWN)
    .fetch_all(store.pool())
    .await
    .context("finding what waiting tasks keep")?;
    Ok(rows
        .into_iter()
        .map(|r| KeptForWaiting {
            task: r.task,
            job: r.job,
            data_time: r.data_time.map(|t| t.to_jiff()),
            upstream: r.upstream,
            tasks: r.tasks,
        })
        .collect())
}
