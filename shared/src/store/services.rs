//! The registry of service instances — schedulers, dependency services and APIs — each checking
//! in on an interval, so that a missing or dead one shows (`chime services`, the overview) instead
//! of stalling what it serves in silence. Workers have their own registry and lease
//! ([`super::workers`]).
//!
//! ```text
//!   start ──insert──▶ alive ──no check-in for 2 × its interval──▶ dead (shown, kept)
//!                       └── clean stop ──delete──▶ (gone)
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::FromRow;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};
use utoipa::ToSchema;

use super::{Context, Store, StoreError};

/// The kinds of service instance that check in.
pub const KINDS: [&str; 3] = ["scheduler", "dependency", "api"];

/// A service instance as `chime services` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, FromRow)]
pub struct ServiceView {
    /// scheduler, dependency or api.
    pub kind: String,
    /// Its id (host-pid-suffix).
    pub instance_id: String,
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// Seconds since its last check-in.
    pub seconds_since_checkin: f64,
    /// alive, or dead (no check-in for twice its interval).
    pub status: String,
}

/// One instance's check-ins: the row is made at once, renewed every `interval` until `shutdown`,
/// then removed.
#[derive(Debug, Clone)]
pub struct CheckIn {
    store: Store,
    kind: &'static str,
    instance_id: String,
    interval: Duration,
}

impl CheckIn {
    /// The check-ins of a new instance of `kind` (one of [`KINDS`]); nothing is written yet.
    pub fn new(store: &Store, kind: &'static str, instance_id: String, interval: Duration) -> Self {
        Self {
            store: store.clone(),
            kind,
            instance_id,
            interval,
        }
    }

    /// Records the instance at once: a service that must not run unregistered calls this first.
    pub async fn start(
        store: &Store,
        kind: &'static str,
        instance_id: String,
        interval: Duration,
    ) -> Result<Self, StoreError> {
        let check_in = Self::new(store, kind, instance_id, interval);
        check_in.once().await?;
        Ok(check_in)
    }

    /// The instance's id.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// One check-in: the row is made if missing (a first check-in, or one a database restore
    /// lost), else its time renewed.
    async fn once(&self) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO service_instances (instance_id, kind, host, pid, checkin_interval_ms,
                                            version)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (instance_id) DO UPDATE SET last_checkin = now()",
        )
        .bind(&self.instance_id)
        .bind(self.kind)
        .bind(crate::node::hostname())
        .bind(i32::try_from(std::process::id()).unwrap_or(i32::MAX))
        .bind(i64::try_from(self.interval.as_millis()).unwrap_or(i64::MAX))
        .bind(env!("CARGO_PKG_VERSION"))
        .execute(self.store.pool())
        .await
        .context("checking in")?;
        Ok(())
    }

    /// Checks in now and every interval until `shutdown`, then removes the instance's row.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let span = info_span!("checkin", kind = self.kind, instance = %self.instance_id);
        async {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => {}
                }
                // A stopping process does not wait out a check-in the database cannot take.
                let checked = tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => break,
                    checked = self.once() => checked,
                };
                match checked {
                    Ok(()) => {
                        metrics::counter!("chime_service_checkins_total", "kind" => self.kind)
                            .increment(1)
                    }
                    Err(error) => warn!(%error, "check-in failed"),
                }
            }
            // Best effort, and briefly: a row left behind ages out as a dead instance.
            let removed = sqlx::query("DELETE FROM service_instances WHERE instance_id = $1")
                .bind(&self.instance_id)
                .execute(self.store.pool());
            match tokio::time::timeout(Duration::from_secs(2), removed).await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => warn!(%error, "cannot remove the instance's row"),
                Err(_) => warn!("cannot remove the instance's row: the database did not answer"),
            }
        }
        .instrument(span)
        .await
    }
}

/// A new instance id: `host-pid-suffix`.
pub fn instance_id() -> String {
    format!(
        "{}-{}-{}",
        crate::node::hostname(),
        std::process::id(),
        &uuid::Uuid::now_v7().simple().to_string()[28..]
    )
}

/// How often a dependency service or an API checks in.
pub const CHECKIN_INTERVAL: Duration = Duration::from_secs(5);

/// Every instance, optionally of one kind, oldest first.
pub async fn list(store: &Store, kind: Option<&str>) -> Result<Vec<ServiceView>, StoreError> {
    sqlx::query_as(
        "SELECT kind, instance_id, host, pid,
                EXTRACT(EPOCH FROM now() - last_checkin)::float8 AS seconds_since_checkin,
                CASE WHEN last_checkin < now() - make_interval(secs => 2 * checkin_interval_ms / 1000.0)
                     THEN 'dead' ELSE 'alive' END AS status
         FROM service_instances WHERE ($1::text IS NULL OR kind = $1)
         ORDER BY kind, started_at",
    )
    .bind(kind)
    .fetch_all(store.pool())
    .await
    .context("listing service instances")
}

/// How many instances of each kind checked in on time (every kind of [`KINDS`] present).
pub async fn alive_by_kind(
    store: &Store,
) -> Result<std::collections::BTreeMap<String, i64>, StoreError> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT kind, count(*) FROM service_instances
         WHERE last_checkin >= now() - make_interval(secs => 2 * checkin_interval_ms / 1000.0)
         GROUP BY kind",
    )
    .fetch_all(store.pool())
    .await
    .context("counting live service instances")?;
    let mut alive: std::collections::BTreeMap<String, i64> =
        KINDS.iter().map(|k| (k.to_string(), 0)).collect();
    alive.extend(rows);
    Ok(alive)
}
