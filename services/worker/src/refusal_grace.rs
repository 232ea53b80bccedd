//! Holding attempts through a refusal by PostgreSQL, under a mark recovery can see.
//!
//! A refused connection may be the server restarting (then nobody can declare this worker dead
//! until it is back and its restart grace has passed) or something refusing this worker alone
//! while recovery carries on. The worker cannot tell which from where it stands, so it holds its
//! attempts past its lease only while the broker keeps its mark (`chime_core::bus::grace`):
//! declared while the lease is still held, checked every heartbeat interval, each answer
//! holding the attempts a second longer. Recovery declares no worker dead while its mark is
//! there; a worker that loses the broker loses the mark and, within a second, its attempts.
//!
//! ```text
//!   refused (lease held) ─▶ declare mark ─▶ check ─▶ check ─▶ … ─▶ heartbeat renews: remove mark
//!                               │ no answer     │ no answer
//!                               ▼               ▼
//!                     the lease runs out as it would have (attempts end lost)
//! ```

use std::sync::Arc;
use std::time::Duration;

use chime_core::bus::{Topology, grace};
use chime_core::store::workers;
use tracing::{Instrument, info, info_span, warn};

use crate::Worker;
use crate::lease::Lease;

/// Starts holding the lease through a refusal that came for a connection asked at `asked_at`,
/// unless a grace is already held or the lease is not (a refusal after the lease ran out proves
/// nothing about the time before it). `holding` is the task of the grace under way.
pub(crate) fn enter(
    worker: &Arc<Worker>,
    asked_at: i64,
    holding: &mut Option<tokio::task::JoinHandle<()>>,
) {
    if holding.as_ref().is_some_and(|h| !h.is_finished()) || !worker.lease.held() {
        return;
    }
    let worker = worker.clone();
    *holding = Some(tokio::spawn(
        hold(worker, asked_at).instrument(info_span!("refusal_grace")),
    ));
}

async fn hold(worker: Arc<Worker>, first_refusal: i64) {
    let id = worker.identity.id.to_string();
    let topology = worker.topology().clone();
    let Some(connection) = worker.broker.current() else {
        warn!("the database refuses this worker and the broker is away: no grace is held");
        return;
    };
    let sent = Lease::now();
    let declared = tokio::time::timeout(
        worker.lease.remaining(),
        grace::declare(&connection, &topology, &id),
    )
    .await;
    let channel = match declared {
        Ok(Ok(channel)) => channel,
        Ok(Err(error)) => {
            warn!(%error, "cannot mark a refusal grace on the broker: no grace is held");
            return;
        }
        Err(_) => {
            warn!("marking a refusal grace took the rest of the lease: no grace is held");
            return;
        }
    };
    metrics::counter!("chime_worker_refusal_graces_total").increment(1);
    if worker.lease.grace_renewed(first_refusal, sent) {
        warn!(
            "the database refuses this worker: its attempts hold while the broker keeps its mark, \
             for up to {:?} (a restart), then end",
            workers::RESTART_GRACE
        );
        let mut tick = tokio::time::interval(workers::HEARTBEAT_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if worker.lease.renewed_since(first_refusal) {
                info!("the database answers again; the refusal grace ends");
                break;
            }
            let sent = Lease::now();
            let checked = tokio::time::timeout(
                grace::MARK_LEASE / 2,
                grace::check(&channel, &topology, &id),
            )
            .await;
            match checked {
                Ok(Ok(())) => {
                    if !worker.lease.grace_renewed(first_refusal, sent) {
                        warn!("the refusal grace ran out; the worker's attempts end");
                        break;
                    }
                }
                Ok(Err(error)) => {
                    warn!(%error, "the broker no longer keeps the grace mark; the worker's attempts end");
                    break;
                }
                Err(_) => {
                    warn!(
                        "the broker did not answer for the grace mark; the worker's attempts end"
                    );
                    break;
                }
            }
        }
    }
    let removed = tokio::time::timeout(
        Duration::from_secs(2),
        grace::remove(&channel, &topology, &id),
    )
    .await;
    let _ = channel.close(200, "grace over".into()).await;
    if !matches!(removed, Ok(Ok(()))) {
        // A mark left behind would make recovery wait out the whole restart grace before
        // declaring this worker dead should it die later (safe, as its guard still ends its
        // attempts with its lease, but ~20 s slow): try again on fresh channels, a few times.
        // Here, not apart: the mark's name is the worker's, and a retry running beside a new
        // grace would remove that grace's mark.
        remove_left_mark(&connection, &topology, &id).await;
    }
}

/// Tries again to remove a mark whose removal failed: three times, a second apart (it goes
/// anyway with the broker connection).
async fn remove_left_mark(connection: &lapin::Connection, topology: &Topology, id: &str) {
    for _ in 0..3 {
        if !connection.status().connected() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let removed = tokio::time::timeout(Duration::from_secs(2), async {
            let channel = connection.create_channel().await?;
            let removed = grace::remove(&channel, topology, id).await;
            let _ = channel.close(200, "grace over".into()).await;
            removed
        })
        .await;
        if matches!(removed, Ok(Ok(()))) {
            info!("the refusal grace's mark, left by a failed removal, is removed");
            return;
        }
    }
    warn!("cannot remove the refusal grace's mark; it goes with the broker connection");
}
