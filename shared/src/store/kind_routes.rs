//! Job kinds and the worker groups that run them (`job_kind_routes`): `hive → etl` sends every
//! hive task without an explicit group to the `etl` queue.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Context, Store, StoreError};
use crate::config::is_valid_name;
use crate::model::kinds::BUILTIN_KINDS;

/// A kind's default worker group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
    store: &Store,
    kind: &str,
    explicit: Option<&str>,
) -> Result<String, StoreError> {
    let builtin = BUILTIN_KINDS.contains(&kind);
    if let (Some(group), true) = (explicit, builtin) {
        return Ok(group.to_string());
    }
    let (route, offered): (Option<String>, bool) = sqlx::query_as(
        "SELECT (SELECT worker_group FROM job_kind_routes WHERE kind = $1),
                EXISTS (SELECT 1 FROM workers
                        WHERE status IN ('online', 'draining') AND $1 = ANY (kinds))",
    )
    .bind(kind)
    .fetch_one(store.pool())
    .await
    .context("looking up the kind's route")?;
    if !builtin && !offered && route.is_none() {
        return Err(StoreError::UnknownKind(kind.to_string()));
    }
    Ok(explicit
        .map(str::to_string)
        .or(route)
        .unwrap_or_else(|| "default".to_string()))
}

/// Sets (or replaces) a kind's route.
pub async fn set(store: &Store, route: &KindRoute) -> Result<(), StoreError> {
    if route.kind.trim().is_empty() {
        return Err(StoreError::Invalid("a route needs a kind".into()));
    }
    if !is_valid_name(&route.worker_group) {
        return Err(StoreError::Invalid(format!(
            "worker group {:?}: use 1-100 letters, digits, '-', '_' or '.'",
            route.worker_group
        )));
    }
    sqlx::query(
        "WITH grp AS (INSERT INTO worker_groups (name) VALUES ($2) ON CONFLICT DO NOTHING)
         INSERT INTO job_kind_routes (kind, worker_group) VALUES ($1, $2)
         ON CONFLICT (kind) DO UPDATE SET worker_group = excluded.worker_group",
    )
    .bind(&route.kind)
    .bind(&route.worker_group)
    .execute(store.pool())
    .await
    .context("setting the kind's route")?;
    Ok(())
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
pub async fn delete(store: &Store, kind: &str) -> Result<(), StoreError> {
    let removed = sqlx::query("DELETE FROM job_kind_routes WHERE kind = $1")
        .bind(kind)
        .execute(store.pool())
        .await
        .context("removing the kind's route")?;
    if removed.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("route for kind {kind}")));
    }
    Ok(())
}
