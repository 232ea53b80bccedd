//! The system gauges: every 15 s, each scheduler instance reads the live tasks by status and
//! worker group, the workers online, the outbox backlog, each job's latest success (from the
//! store) and each worker group's queue depth and consumers (from the broker), and sets them as
//! gauges on its `/metrics`. Every
//! instance reports the same numbers; take the max across instances.

use std::time::Duration;

use chime_core::bus::Broker;
use chime_core::store::{Store, gauges};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

/// How often the gauges are read.
const SAMPLE_EVERY: Duration = Duration::from_secs(15);

/// Sets the gauges every [`SAMPLE_EVERY`] until `shutdown`.
pub async fn run(store: Store, broker: Broker, shutdown: CancellationToken) {
    async {
        // Not at once: the first sample comes once the services have declared their queues.
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + SAMPLE_EVERY, SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Series seen last time, so a status or group that emptied goes to 0, not stale.
        let mut last_live: Vec<(String, String)> = Vec::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Raced with shutdown: a sample is several statements and broker calls, each of
            // which may wait on a loaded database or broker.
            tokio::select! {
                _ = shutdown.cancelled() => return,
                () = sample(&store, &broker, &mut last_live) => {}
            }
        }
    }
    .instrument(info_span!("gauges"))
    .await;
}

/// Reads the gauges once and sets them; `last_live` holds the task series set last time.
async fn sample(store: &Store, broker: &Broker, last_live: &mut Vec<(String, String)>) {
    match gauges::read(store).await {
        Ok(snapshot) => {
            for (status, group) in last_live.iter() {
                metrics::gauge!("chime_tasks", "status" => status.clone(), "worker_group" => group.clone()).set(0.0);
            }
            last_live.clear();
            for (status, group, count) in &snapshot.live_tasks {
                metrics::gauge!("chime_tasks", "status" => status.clone(), "worker_group" => group.clone()).set(*count as f64);
                last_live.push((status.clone(), group.clone()));
            }
            for group in &snapshot.worker_groups {
                let online = snapshot.workers_online_in(group);
                metrics::gauge!("chime_workers_online", "worker_group" => group.clone())
                    .set(online as f64);
                match broker.group_stats(group).await {
                    Ok(Some(queues)) => {
                        metrics::gauge!("chime_queue_depth", "worker_group" => group.clone())
                            .set(f64::from(queues.messages));
                        metrics::gauge!("chime_queue_consumers", "worker_group" => group.clone())
                            .set(f64::from(queues.consumers));
                    }
                    Ok(None) => {}
                    Err(error) => debug!(%error, group, "cannot read the queue's depth"),
                }
            }
            metrics::gauge!("chime_outbox_backlog").set(snapshot.outbox_backlog as f64);
            metrics::gauge!("chime_outbox_oldest_seconds").set(snapshot.outbox_oldest_seconds);
        }
        Err(error) => debug!(%error, "cannot read the system gauges"),
    }
    // One series per job: the number of jobs bounds it.
    match gauges::last_successes(store).await {
        Ok(jobs) => {
            for (job, at) in jobs {
                metrics::gauge!("chime_job_last_success_timestamp_seconds", "job" => job).set(at);
            }
        }
        Err(error) => debug!(%error, "cannot read the jobs' latest successes"),
    }
}
