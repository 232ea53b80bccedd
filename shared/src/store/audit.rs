//! The audit trail: who changed what through the API (kills, reruns, runs, pauses, jobs,
//! triggers, calendars, routes, worker groups, tokens, webhooks, prunes), newest first: the
//! object changed, and each setting before and after (a creation's with nothing before). No
//! secret is kept: handlers pass what may be shown ([`AuditDetail::created`]).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::patch::Change;
use super::{Context, Store, StoreError};

/// What a change was made to, and how, as a handler tells the audit trail.
#[derive(Debug, Clone, Default)]
pub struct AuditDetail {
    /// The object, as `<kind> <name>`: `job default.export`, `trigger default.nightly`.
    pub object: Option<String>,
    /// For an update, each setting it changed.
    pub changes: Vec<Change>,
    /// The definitions source an apply made the change from (`chime apply --source`).
    pub source: Option<String>,
}

impl AuditDetail {
    /// A creation (or a one-off action such as a prune): `object`, and each of `settings`' fields
    /// as it was set (before: null). The caller passes only what may be shown: never a secret,
    /// and an executor spec's `headers` and `env` are masked here as an update's are.
    pub fn created(object: String, settings: serde_json::Value) -> Self {
        let changes = match settings {
            serde_json::Value::Object(fields) => fields
                .into_iter()
                .map(|(field, after)| Change {
                    field,
                    before: serde_json::Value::Null,
                    after,
                })
                .collect(),
            _ => Vec::new(),
        };
        Self {
            object: Some(object),
            changes: super::patch::redacted(&changes),
            source: None,
        }
    }
}

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
    /// What it changed, as `<kind> <name>` (`job default.export`); absent for calls that name
    /// no one object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// For an update, each setting before and after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// For a change an apply made, the definitions source it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The object an API path names, as `<kind> <name>`, where the path alone names it (a
/// creation's does not: its handler says).
pub fn object_of_path(path: &str) -> Option<String> {
    // Names are percent-encoded in paths; the trail shows them as they are.
    let decoded: Vec<std::borrow::Cow<'_, str>> = path
        .strip_prefix("/api/v1/")?
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy())
        .collect();
    let segments: Vec<&str> = decoded.iter().map(AsRef::as_ref).collect();
    match segments.as_slice() {
        ["jobs", group, name, ..] => Some(format!("job {group}.{name}")),
        ["triggers", group, name, ..] => Some(format!("trigger {group}.{name}")),
        ["trigger-groups", group, ..] => Some(format!("trigger-group {group}")),
        ["calendars", name, ..] => Some(format!("calendar {name}")),
        ["worker-groups", name, ..] => Some(format!("worker-group {name}")),
        ["kind-routes", kind, ..] => Some(format!("kind-route {kind}")),
        ["tasks", id, ..] => Some(format!("task {id}")),
        ["workers", id, ..] => Some(format!("worker {id}")),
        ["backfills", id, ..] => Some(format!("backfill {id}")),
        ["tokens", id, ..] => Some(format!("token {id}")),
        ["webhooks", id, ..] => Some(format!("webhook {id}")),
        _ => None,
    }
}

/// Records a change to `target` (the path), with what the handler said of it, on `db` (an
/// apply records its changes inside its own transaction).
pub async fn record(
    db: impl sqlx::PgExecutor<'_>,
    actor: &str,
    action: &str,
    target: &str,
    status: u16,
    detail: Option<&AuditDetail>,
) -> Result<(), StoreError> {
    let object = detail
        .and_then(|d| d.object.clone())
        .or_else(|| object_of_path(target));
    let changes = detail
        .filter(|d| !d.changes.is_empty())
        .map(|d| sqlx::types::Json(&d.changes));
    sqlx::query(
        "INSERT INTO audit_events (actor, action, target, status, object, changes, source)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(actor)
    .bind(action)
    .bind(target)
    .bind(i32::from(status))
    .bind(object)
    .bind(changes)
    .bind(detail.and_then(|d| d.source.as_deref()))
    .execute(db)
    .await
    .context("recording an audit event")?;
    Ok(())
}

/// The newest `limit` events, optionally of one actor and of one object (`job default.export`,
/// or just its name, `default.export`), before id `before` (paging).
pub async fn list(
    store: &Store,
    actor: Option<&str>,
    object: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditEvent>, StoreError> {
    // A bare name matches it as any kind of object.
    let objects: Option<Vec<String>> = object.map(|o| {
        if o.contains(' ') {
            vec![o.to_string()]
        } else {
            [
                "job",
                "trigger",
                "trigger-group",
                "calendar",
                "worker-group",
                "kind-route",
                "task",
                "worker",
                "backfill",
                "token",
                "webhook",
                "history",
                "definitions",
            ]
            .iter()
            .map(|kind| format!("{kind} {o}"))
            .collect()
        }
    });
    #[derive(sqlx::FromRow)]
    struct Row {
        id: i64,
        at: jiff_sqlx::Timestamp,
        actor: String,
        action: String,
        target: String,
        status: i32,
        object: Option<String>,
        changes: Option<sqlx::types::Json<Vec<Change>>>,
        source: Option<String>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, at, actor, action, target, status, object, changes, source FROM audit_events
         WHERE ($1::text IS NULL OR actor = $1) AND ($2::bigint IS NULL OR id < $2)
           AND ($4::text[] IS NULL OR object = ANY ($4))
         ORDER BY id DESC LIMIT $3",
    )
    .bind(actor)
    .bind(before)
    .bind(limit.clamp(1, 1000))
    .bind(objects)
    .fetch_all(store.pool())
    .await
    .context("listing audit events")?;
    Ok(rows
        .into_iter()
        .map(|r| AuditEvent {
            id: r.id,
            at: r.at.to_jiff(),
            actor: r.actor,
            action: r.action,
            target: r.target,
            status: r.status,
            object: r.object,
            changes: r.changes.map(|c| c.0).unwrap_or_default(),
            source: r.source,
        })
        .collect())
}
