//! Worker groups: each is a pair of queues (`<prefix>.group.<name>` for tasks that run as
//! processes, `<prefix>.inline.<name>` for noop and http tasks) that workers consume. A group is
//! declared before anything is sent to it (`chime group create`), so a typo in a submission, a
//! job or a route is refused instead of making a queue nobody reads. A worker started for a group
//! declares it (an operator who starts a worker for `etl` means `etl` to exist).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Context, Store, StoreError};
use crate::config::is_valid_name;
use crate::model::check_text;

/// A worker group as created.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWorkerGroup {
    /// Its name (part of its queue's name).
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: String,
}

/// A worker group with what uses it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerGroupView {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// When it was declared.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// Workers online (or draining) that consume it.
    pub workers_online: i64,
    /// Jobs whose tasks go to it.
    pub jobs: i64,
    /// Tasks waiting, ready, running or retrying in it.
    pub live_tasks: i64,
}

/// Declares a group.
pub async fn create(store: &Store, group: &NewWorkerGroup) -> Result<WorkerGroupView, StoreError> {
    declare(store.pool(), group, None).await?;
    get(store, &group.name).await
}

/// Declares a group on `db`; `source` is the definitions source that declared it (None: by
/// hand).
pub async fn declare(
    db: impl sqlx::PgExecutor<'_>,
    group: &NewWorkerGroup,
    source: Option<&str>,
) -> Result<(), StoreError> {
    check(group)?;
    let inserted =
        sqlx::query("INSERT INTO worker_groups (name, description, source) VALUES ($1, $2, $3)")
            .bind(&group.name)
            .bind(&group.description)
            .bind(source)
            .execute(db)
            .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Err(
            StoreError::Conflict(format!("worker group {} exists already", group.name)),
        ),
        Err(e) => Err(e).context("declaring the worker group"),
    }
}

/// Changes a group's description; `source` is the definitions source that changed it (None, by
/// hand, keeps the one it had).
pub async fn describe(
    db: impl sqlx::PgExecutor<'_>,
    group: &NewWorkerGroup,
    source: Option<&str>,
) -> Result<(), StoreError> {
    check(group)?;
    let done = sqlx::query(
        "UPDATE worker_groups SET description = $2, source = coalesce($3, source) WHERE name = $1",
    )
    .bind(&group.name)
    .bind(&group.description)
    .bind(source)
    .execute(db)
    .await
    .context("describing the worker group")?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("worker group {}", group.name)));
    }
    Ok(())
}

fn check(group: &NewWorkerGroup) -> Result<(), StoreError> {
    if !is_valid_name(&group.name) {
        return Err(StoreError::Invalid(format!(
            "worker group {:?}: use 1-100 letters, digits, '-', '_' or '.'",
            group.name
        )));
    }
    check_text("description", &group.description).map_err(|e| StoreError::Invalid(e.to_string()))
}

const VIEW: &str = "SELECT g.name, g.description, g.created_at,
        (SELECT count(*) FROM workers w
         WHERE w.status IN ('online', 'draining') AND g.name = ANY (w.groups)),
        (SELECT count(*) FROM jobs j WHERE j.worker_group = g.name),
        (SELECT count(*) FROM tasks t WHERE t.worker_group = g.name
           AND t.status IN ('waiting', 'ready', 'running', 'retrying'))
    FROM worker_groups g";

type Row = (String, String, jiff_sqlx::Timestamp, i64, i64, i64);

fn view((name, description, created_at, workers_online, jobs, live_tasks): Row) -> WorkerGroupView {
    WorkerGroupView {
        name,
        description,
        created_at: created_at.to_jiff(),
        workers_online,
        jobs,
        live_tasks,
    }
}

/// One group.
pub async fn get(store: &Store, name: &str) -> Result<WorkerGroupView, StoreError> {
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!("{VIEW} WHERE g.name = $1")))
        .bind(name)
        .fetch_optional(store.pool())
        .await
        .context("reading the worker group")?;
    row.map(view)
        .ok_or_else(|| StoreError::NotFound(format!("worker group {name}")))
}

/// Every group, by name.
pub async fn list(store: &Store) -> Result<Vec<WorkerGroupView>, StoreError> {
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!("{VIEW} ORDER BY g.name")))
        .fetch_all(store.pool())
        .await
        .context("listing worker groups")?;
    Ok(rows.into_iter().map(view).collect())
}

/// Removes a group nothing uses: no job, no kind route, no live task. `default` stays.
pub async fn delete(store: &Store, name: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    remove(&mut tx, name).await?;
    tx.commit().await.context("committing the deletion")?;
    Ok(())
}

/// [`delete`] inside the caller's transaction.
pub async fn remove(tx: &mut sqlx::PgConnection, name: &str) -> Result<(), StoreError> {
    if name == "default" {
        return Err(StoreError::Conflict(
            "the default worker group cannot be deleted: tasks without a group go to it".into(),
        ));
    }
    // Locks the group's row, so no job or route can take it while the check runs (their foreign
    // keys wait for this transaction).
    let found: Option<String> =
        sqlx::query_scalar("SELECT name FROM worker_groups WHERE name = $1 FOR UPDATE")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await
            .context("locking the worker group")?;
    if found.is_none() {
        return Err(StoreError::NotFound(format!("worker group {name}")));
    }
    let (jobs, routes, live): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM jobs WHERE worker_group = $1),
                (SELECT count(*) FROM job_kind_routes WHERE worker_group = $1),
                (SELECT count(*) FROM tasks WHERE worker_group = $1
                   AND status IN ('waiting', 'ready', 'running', 'retrying'))",
    )
    .bind(name)
    .fetch_one(&mut *tx)
    .await
    .context("finding what uses the worker group")?;
    if jobs + routes + live > 0 {
        return Err(StoreError::Conflict(format!(
            "worker group {name} is in use: {jobs} job(s), {routes} kind route(s), {live} live \
             task(s)"
        )));
    }
    sqlx::query("DELETE FROM worker_groups WHERE name = $1")
        .bind(name)
        .execute(&mut *tx)
        .await
        .context("deleting the worker group")?;
    Ok(())
}
