//! The audit trail: who changed what through the API (kills, reruns, runs, pauses, jobs,
//! triggers, calendars, routes, worker groups, tokens), newest first.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Context, Store, StoreError};

/// One change, as the API answered it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditEvent {
    /// Its sequence number.
    pub id: i64,
    /// When.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// The token's name (or `local` on an install without tokens).
    pub actor: String,
    /// The HTTP method.
    pub action: String,
    /// The path it changed.
    pub target: String,
    /// The HTTP status it got.
    pub status: i32,
}

/// Records a change.
pub async fn record(
    store: &Store,
    actor: &str,
    action: &str,
    target: &str,
    status: u16,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO audit_events (actor, action, target, status) VALUES ($1, $2, $3, $4)")
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(i32::from(status))
        .execute(store.pool())
        .await
        .context("recording an audit event")?;
    Ok(())
}

/// The newest `limit` events, optionally of one actor, before id `before` (paging).
pub async fn list(
    store: &Store,
    actor: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditEvent>, StoreError> {
    let rows: Vec<(i64, jiff_sqlx::Timestamp, String, String, String, i32)> = sqlx::query_as(
        "SELECT id, at, actor, action, target, status FROM audit_events
         WHERE ($1::text IS NULL OR actor = $1) AND ($2::bigint IS NULL OR id < $2)
         ORDER BY id DESC LIMIT $3",
    )
    .bind(actor)
    .bind(before)
    .bind(limit.clamp(1, 1000))
    .fetch_all(store.pool())
    .await
    .context("listing audit events")?;
    Ok(rows
        .into_iter()
        .map(|(id, at, actor, action, target, status)| AuditEvent {
            id,
            at: at.to_jiff(),
            actor,
            action,
            target,
            status,
        })
        .collect())
}
