//! The retention pass: every hour, history older than `scheduler.retention_days` (or a job's own
//! `retention_days`) is pruned ([`chime_core::store::retention::prune_by_policy`]); with several
//! instances, one prunes at a time.

use std::time::Duration;

use chime_core::store::{Store, retention};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

/// How often history is pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Prunes history older than `retention` every hour until `shutdown`; does nothing without one.
pub async fn run(store: Store, retention: Option<Duration>, shutdown: CancellationToken) {
    let Some(retention) = retention else {
        return;
    };
    let days = u32::try_from(retention.as_secs() / 86_400)
        .unwrap_or(u32::MAX)
        .max(1);
    async {
        // Not at once: a fleet restarting together should not all start with a prune.
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + Duration::from_secs(60),
            PRUNE_EVERY,
        );
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let started = std::time::Instant::now();
            match retention::prune_by_policy(&store, days).await {
                Ok(report) if report.busy => debug!("another instance is pruning"),
                Ok(report) => {
                    metrics::histogram!("chime_prune_seconds").record(started.elapsed());
                    info!(
                        tasks = report.tasks,
                        fired_triggers = report.fired_triggers,
                        days,
                        "pruned history"
                    );
                }
                Err(error) => warn!(%error, "cannot prune history; trying again in an hour"),
            }
        }
    }
    .instrument(info_span!("retention"))
    .await;
}
