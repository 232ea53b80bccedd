//! The outbox table: messages that follow a database change, waiting for the relay to publish
//! them (see `bus::relay`). Rows are written by the statements that make the change; this module
//! claims, marks and prunes them.

use std::borrow::Cow;
use std::time::Duration;

use sqlx::FromRow;
use sqlx::types::Json;

use super::{Context, Store, StoreError};

/// A message the relay must publish.
#[derive(Debug, Clone, FromRow)]
pub struct OutboxMessage {
    /// The row's id.
    pub id: i64,
    /// Exchange to publish to.
    pub exchange: String,
    /// Routing key.
    pub routing_key: String,
    /// The JSON body, as text.
    pub body: String,
    /// AMQP headers (string values).
    pub headers: Json<serde_json::Map<String, serde_json::Value>>,
    /// Seconds from the claim until the row may be published (0 when due).
    pub wait_seconds: f64,
    /// The database's clock at the claim (so publish times can be stated on that clock).
    pub claimed_at: jiff_sqlx::Timestamp,
    /// Whether the body is an array of `{"k": routing key, "b": body}` messages.
    pub batched: bool,
}

/// One message to publish: (routing key, body).
pub type Message<'a> = (Cow<'a, str>, Cow<'a, str>);

/// One message of a batched row.
#[derive(serde::Deserialize)]
struct BatchedMessage {
    k: String,
    b: Box<serde_json::value::RawValue>,
}

impl OutboxMessage {
    /// The messages this row publishes, as (routing key, body): one (borrowed from the row), or
    /// a batched row's many.
    pub fn messages(&self) -> Result<Vec<Message<'_>>, serde_json::Error> {
        if !self.batched {
            return Ok(vec![(
                Cow::Borrowed(self.routing_key.as_str()),
                Cow::Borrowed(self.body.as_str()),
            )]);
        }
        let batch: Vec<BatchedMessage> = serde_json::from_str(&self.body)?;
        Ok(batch
            .into_iter()
            .map(|m| (Cow::Owned(m.k), Cow::Owned(m.b.get().to_string())))
            .collect())
    }
}

/// Claims up to `limit` unsent rows due within `ahead`, earliest first, for `lease`, skipping
/// rows another relay holds. A relay that dies loses its lease and the rows are claimed again.
/// Claiming a little ahead lets the relay publish each row at its time, not one round trip late.
pub async fn claim_due(
    store: &Store,
    limit: i64,
    lease: Duration,
    ahead: Duration,
) -> Result<Vec<OutboxMessage>, StoreError> {
    sqlx::query_as(
        r#"
        UPDATE outbox o SET claimed_until = now() + make_interval(secs => $2)
        FROM (
            SELECT id FROM outbox
            WHERE published_at IS NULL AND publish_at <= now() + make_interval(secs => $3)
              AND (claimed_until IS NULL OR claimed_until < now())
            ORDER BY publish_at, id
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        ) due
        WHERE o.id = due.id
        RETURNING o.id, o.exchange, o.routing_key, o.body::text AS body, o.headers,
                  greatest(EXTRACT(EPOCH FROM o.publish_at - now())::float8, 0) AS wait_seconds,
                  now() AS claimed_at, o.batched
        "#,
    )
    .bind(limit)
    .bind(lease.as_secs_f64())
    .bind(ahead.as_secs_f64())
    .fetch_all(store.pool())
    .await
    .context("claiming outbox rows")
}

/// Marks rows published, each at the time the broker confirmed it.
pub async fn mark_published(
    store: &Store,
    published: &[(i64, jiff::Timestamp)],
) -> Result<(), StoreError> {
    if published.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = published.iter().map(|(id, _)| *id).collect();
    let times: Vec<jiff_sqlx::Timestamp> = published.iter().map(|(_, t)| (*t).into()).collect();
    sqlx::query(
        "UPDATE outbox o SET published_at = u.at
         FROM UNNEST($1::bigint[], $2::timestamptz[]) AS u(id, at) WHERE o.id = u.id",
    )
    .bind(&ids)
    .bind(&times)
    .execute(store.pool())
    .await
    .context("marking outbox rows published")?;
    Ok(())
}

/// Gives claimed rows back (the broker refused or went away) so any relay can retry them.
pub async fn release(store: &Store, ids: &[i64]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE outbox SET claimed_until = NULL WHERE id = ANY($1) AND published_at IS NULL",
    )
    .bind(ids)
    .execute(store.pool())
    .await
    .context("releasing outbox rows")?;
    Ok(())
}

/// Deletes up to `limit` rows published longer than `retention` ago; returns how many.
pub async fn prune_published(
    store: &Store,
    retention: Duration,
    limit: i64,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        r#"
        DELETE FROM outbox WHERE id IN (
            SELECT id FROM outbox
            WHERE published_at < now() - make_interval(secs => $1)
            ORDER BY id LIMIT $2
        )
        "#,
    )
    .bind(retention.as_secs_f64())
    .bind(limit)
    .execute(store.pool())
    .await
    .context("pruning the outbox")?;
    Ok(done.rows_affected())
}

/// How long until the earliest unsent row is due (zero if one is due now; None if there is
/// none). Rows written by a scheduler wait for their fire time.
pub async fn until_next_due(store: &Store) -> Result<Option<Duration>, StoreError> {
    let seconds: Option<f64> = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM (min(publish_at) - now()))::float8
         FROM outbox WHERE published_at IS NULL",
    )
    .fetch_one(store.pool())
    .await
    .context("finding the next due outbox row")?;
    Ok(seconds.map(|s| Duration::from_secs_f64(s.max(0.0))))
}

/// Rows not yet published (for tests, readiness and the dashboard).
pub async fn unsent_count(store: &Store) -> Result<i64, StoreError> {
    sqlx::query_scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL")
        .fetch_one(store.pool())
        .await
        .context("counting unsent outbox rows")
}
