//! Where failure notifications leave: due webhook deliveries are claimed, POSTed and recorded
//! (`shared/src/store/webhooks.rs` has their life). Every scheduler instance delivers; a claim
//! keeps two from sending the same try. Beside it, [`check_windows`] looks every
//! [`CHECK_WINDOWS`] for jobs that missed their success window, whose notifications are then
//! delivered like any other (a slow receiver does not delay the check).

use std::time::Duration;

use chime_core::store::{Store, webhooks};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};

/// How often due deliveries are looked for.
const POLL: Duration = Duration::from_secs(1);
/// How many deliveries one round sends.
const BATCH: i64 = 20;
/// How often jobs are checked for a missed success window.
const CHECK_WINDOWS: Duration = Duration::from_secs(5);
/// How long a receiver has to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Delivers webhooks until `shutdown`.
pub async fn run(store: Store, shutdown: CancellationToken) {
    // ring is the one crypto provider linked in; a second install attempt is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder()
        .user_agent(concat!("chime/", env!("CARGO_PKG_VERSION")))
        .timeout(TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            warn!(%error, "cannot build the webhook client; webhooks are not delivered");
            return;
        }
    };
    async {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            // A stopping scheduler does not wait out a claim the database cannot answer.
            let claimed = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                claimed = webhooks::claim_due(&store, BATCH) => claimed,
            };
            let due = match claimed {
                Ok(due) => due,
                Err(error) => {
                    warn!(%error, "cannot claim webhook deliveries");
                    continue;
                }
            };
            for delivery in due {
                let sent = client.post(&delivery.url).json(&delivery.body.0).send().await;
                let error = match sent {
                    Ok(answer) if answer.status().is_success() => None,
                    Ok(answer) => Some(format!("the receiver answered {}", answer.status())),
                    Err(error) => Some(format!("cannot reach the receiver: {error}")),
                };
                let outcome = if error.is_some() { "failed" } else { "delivered" };
                metrics::counter!("chime_webhook_deliveries_total", "outcome" => outcome)
                    .increment(1);
                if let Some(error) = &error {
                    warn!(id = delivery.id, attempt = delivery.attempts, %error, "webhook not delivered; retrying later");
                }
                if let Err(error) =
                    webhooks::record(&store, delivery.id, delivery.attempts, error.as_deref()).await
                {
                    // The claim runs out and the delivery is tried again.
                    warn!(%error, "cannot record a webhook delivery");
                }
            }
        }
    }
    .instrument(info_span!("webhooks"))
    .await
}

/// Looks for jobs past their success window every [`CHECK_WINDOWS`] until `shutdown`.
pub async fn check_windows(store: Store, shutdown: CancellationToken) {
    async {
        let mut tick = tokio::time::interval(CHECK_WINDOWS);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Not waited for by a stopping scheduler (a database that is away holds it for the
            // pool's timeout); one transaction, so cut short it is as if never begun.
            let checked = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                checked = webhooks::notify_overdue(&store) => checked,
            };
            match checked {
                Ok(0) => {}
                Ok(jobs) => {
                    warn!(jobs, "jobs missed their success window; notifying");
                    metrics::counter!("chime_jobs_success_overdue_total")
                        .increment(jobs.unsigned_abs());
                }
                Err(error) => warn!(%error, "cannot check the jobs' success windows"),
            }
        }
    }
    .instrument(info_span!("success_windows"))
    .await
}
