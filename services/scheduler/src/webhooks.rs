//! Where failure notifications leave: due webhook deliveries are claimed, POSTed and recorded
//! (`shared/src/store/webhooks.rs` has their life). Every scheduler instance delivers; a claim
//! keeps two from sending the same try. Deliveries go out concurrently, at most [`IN_FLIGHT`]
//! at once and [`PER_RECEIVER`] for one webhook, so receivers that hang (each try waits up to
//! [`TIMEOUT`]) hold only their own share and a healthy receiver is told within a second or two.
//! A delivery is tried at most `MAX_ATTEMPTS` times. Beside it, [`check_windows`] looks every
//! [`CHECK_WINDOWS`] for jobs that missed their success window, whose notifications are then
//! delivered like any other (a slow receiver does not delay the check).

use std::collections::HashMap;
use std::time::Duration;

use chime_core::store::Store;
use chime_core::store::webhooks::{self, Delivery, TryOutcome};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};

/// How often due deliveries are looked for.
const POLL: Duration = Duration::from_secs(1);
/// How many deliveries one instance has in flight at most.
const IN_FLIGHT: usize = 32;
/// How many deliveries to one webhook one instance has in flight at most.
const PER_RECEIVER: i64 = 2;
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
        let mut sending: JoinSet<i64> = JoinSet::new();
        // Deliveries in flight, by webhook.
        let mut busy: HashMap<i64, i64> = HashMap::new();
        // An interval, not a sleep per turn: deliveries ending must not put the next claim off.
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
                Some(done) = sending.join_next(), if !sending.is_empty() => {
                    settle(&mut busy, done);
                    continue;
                }
            }
            while let Some(done) = sending.try_join_next() {
                settle(&mut busy, done);
            }
            let room = IN_FLIGHT.saturating_sub(sending.len());
            metrics::gauge!("chime_webhook_deliveries_in_flight").set(sending.len() as f64);
            if room == 0 {
                continue;
            }
            let in_flight: Vec<(i64, i64)> = busy.iter().map(|(k, v)| (*k, *v)).collect();
            // A stopping scheduler does not wait out a claim the database cannot answer.
            let claimed = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                claimed = webhooks::claim_due(&store, room as i64, PER_RECEIVER, &in_flight) => claimed,
            };
            let due = match claimed {
                Ok(due) => due,
                Err(error) => {
                    warn!(%error, "cannot claim webhook deliveries");
                    continue;
                }
            };
            for delivery in due {
                *busy.entry(delivery.webhook_id).or_default() += 1;
                let (client, store) = (client.clone(), store.clone());
                sending.spawn(async move {
                    let webhook = delivery.webhook_id;
                    deliver(&client, &store, delivery).await;
                    webhook
                });
            }
        }
        // Tries cut short here are claimed: another instance (or this one, restarted) tries
        // them again when the claim runs out.
        sending.shutdown().await;
    }
    .instrument(info_span!("webhooks"))
    .await
}

/// One delivery done: its webhook has one fewer in flight.
fn settle(busy: &mut HashMap<i64, i64>, done: Result<i64, tokio::task::JoinError>) {
    let Ok(webhook) = done else { return };
    if let Some(n) = busy.get_mut(&webhook) {
        *n -= 1;
        if *n <= 0 {
            busy.remove(&webhook);
        }
    }
}

/// One try of one delivery: POSTed, then recorded.
async fn deliver(client: &reqwest::Client, store: &Store, delivery: Delivery) {
    let sent = client
        .post(&delivery.url)
        .json(&delivery.body.0)
        .send()
        .await;
    // reqwest's errors name the URL, whose password or query may be the receiver's secret.
    let error = match sent {
        Ok(answer) if answer.status().is_success() => None,
        Ok(answer) => Some(format!("the receiver answered {}", answer.status())),
        Err(error) => Some(format!(
            "cannot reach the receiver: {}",
            chime_core::redact::error_with_causes(&error.without_url())
        )),
    };
    let recorded = webhooks::record(store, delivery.id, delivery.attempts, error.as_deref()).await;
    let outcome = match &recorded {
        Ok(TryOutcome::Delivered) => "delivered",
        Ok(TryOutcome::Retrying) | Err(_) => "failed",
        Ok(TryOutcome::GaveUp) => "gave_up",
    };
    metrics::counter!("chime_webhook_deliveries_total", "outcome" => outcome).increment(1);
    match (recorded, &error) {
        // The claim runs out and the delivery is tried again.
        (Err(record_error), _) => warn!(%record_error, "cannot record a webhook delivery"),
        (Ok(TryOutcome::GaveUp), Some(error)) => warn!(
            id = delivery.id, webhook = delivery.webhook_id, attempt = delivery.attempts, %error,
            "webhook not delivered; given up after its last try"
        ),
        (Ok(_), Some(error)) => warn!(
            id = delivery.id, webhook = delivery.webhook_id, attempt = delivery.attempts, %error,
            "webhook not delivered; retrying later"
        ),
        (Ok(_), None) => {}
    }
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
