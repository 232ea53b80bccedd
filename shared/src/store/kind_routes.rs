//! Job kinds and the worker groups that run them (`job_kind_routes`): `hive → etl` sends every
//! hive task without an explicit group to the `etl` queue.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Context, Store, StoreError};
use crate::config::is_valid_name;
use crate::model::kinds::BUILTIN_KINDS;

/// A kind's default worker group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KindRoute {
    /// The job kind.
    pub kind: String,
    /// The worker group its tasks go to when none is given.
    pub worker_group: String,
}

/// The worker group a task or job of `kind` goes to: `explicit` if given, else the kind's route,
/// else `default`. A kind that is not built in must be routed or offered by a live worker (a
/// command template in its configuration); any other kind is refused.
pub async fn resolve_group(
    db: impl sqlx::PgExecutor<'_>,
    kind: &str,
    explicit: Option<&str>,
) -> Result<String, StoreError> {
    let builtin = BUILTIN_KINDS.contains(&kind);
    // One round trip: the route, whether a live worker offers the kind, and whether the group
    // the task would go to is declared.
    let (route, offered, group, declared): (Option<String>, bool, String, bool) = sqlx::query_as(
        "WITH r AS (SELECT (SELECT worker_group FROM job_kind_routes WHERE kind = $1) AS route),
                  g AS (SELECT route, coalesce($2, route, 'default') AS grp FROM r)
             SELECT route,
                    $3 OR EXISTS (SELECT 1 FROM workers
                                  WHERE status IN ('online', 'draining') AND $1 = ANY (kinds)),
                    grp,
                    EXISTS (SELECT 1 FROM worker_groups WHERE name = grp)
             FROM g",
    )
    .bind(kind)
    .bind(explicit)
    .bind(builtin)
    .fetch_one(db)
    .await
    .context("looking up the kind's route")?;
    if !builtin && !offered && route.is_none() {
        return Err(StoreError::UnknownKind(kind.to_string()));
    }
    if !declared {
        return Err(StoreError::UnknownGroup(group));
    }
    Ok(group)
}

/// Sets (or replaces) a kind's route; `source` is the definitions source that set it (None, by
/// hand, keeps the source it had).
pub async fn set(
    db: impl sqlx::PgExecutor<'_>,
    route: &KindRoute,
    source: Option<&str>,
) -> Result<(), StoreError> {
    if !is_valid_name(&route.kind) {
        return Err(StoreError::Invalid(format!(
            "kind {:?}: use 1-100 letters, digits, '-', '_' or '.'",
            route.kind
        )));
    }
    if !is_valid_name(&route.worker_group) {
        return Err(StoreError::Invalid(format!(
            "worker group {:?}: use 1-100 letters, digits, '-', '_' or '.'",
            route.worker_group
        )));
    }
    let done = sqlx::query(
        "INSERT INTO job_kind_routes (kind, worker_group, source) VALUES ($1, $2, $3)
         ON CONFLICT (kind) DO UPDATE SET worker_group = excluded.worker_group,
                                          source = coalesce(excluded.source, job_kind_routes.source)",
    )
    .bind(&route.kind)
    .bind(&route.worker_group)
    .bind(source)
    .execute(db)
    .await;
    match done {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23503") => {
            Err(StoreError::UnknownGroup(route.worker_group.clone()))
        }
        Err(e) => Err(e).context("setting the kind's route"),
    }
}

/// Every route, by kind.
pub async fn list(store: &Store) -> Result<Vec<KindRoute>, StoreError> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT kind, worker_group FROM job_kind_routes ORDER BY kind")
            .fetch_all(store.pool())
            .await
            .context("listing kind routes")?;
    Ok(rows
        .into_iter()
        .map(|(kind, worker_group)| KindRoute { kind, worker_group })
        .collect())
}

/// Removes a kind's route.
pub async fn delete(db: impl sqlx::PgExecutor<'_>, kind: &str) -> Result<(), StoreError> {
    let removed = sqlx::query("DELETE FROM job_kind_routes WHERE kind = $1")
        .bind(kind)
        .execute(db)
        .await
        .context("removing the kind's route")?;
    if removed.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("route for kind {kind}")));
    }
    Ok(())
}
