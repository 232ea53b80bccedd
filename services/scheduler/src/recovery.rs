//! Where the attempts of dead workers are recovered, and lost task messages published again.
//!
//! Every [`workers::HEARTBEAT_INTERVAL`] one instance at a time (an advisory lock) declares dead
//! the workers whose liveness lock is free and heartbeat stale, and recovers their attempts
//! (`task_lifecycle::recover_lost_attempts`): a worker killed with -9 is noticed in about two
//! seconds — but only once this instance's own recovery session has lived
//! [`workers::RESTART_GRACE`], so a database restart never makes live workers look dead. Less often, ready tasks that no worker started for `republish_after`, in groups whose
//! queue is empty, get their message again (`task_lifecycle::republish_stale_ready`): whatever the
//! bus lost — a message dead-lettered during an outage, a deleted queue — the row brings back.

use std::time::Duration;

use chime_core::bus::Broker;
use chime_core::store::{Store, StoreError, task_lifecycle, workers};
use sqlx::{ConnectOptions, PgConnection};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

/// How many attempts one pass recovers at most.
const RECOVERY_BATCH: i64 = 1000;
/// How many ready tasks one pass re-publishes at most.
const REPUBLISH_BATCH: i64 = 1000;
/// How often the re-publish pass runs.
const REPUBLISH_EVERY: Duration = Duration::from_secs(5);

/// Runs recovery until `shutdown`.
pub async fn run(
    store: Store,
    broker: Broker,
    republish_after: Duration,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(workers::HEARTBEAT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_republish = tokio::time::Instant::now();
    // Recovery runs on a session of its own, whose age is the guard against false deaths: it
    // breaks whenever the database restarts, recovers from a crash or fails over, and no worker
    // is declared dead until it has lived RESTART_GRACE again.
    let mut session: Option<(PgConnection, tokio::time::Instant)> = None;
    async {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(error) = workers::mark_disconnected(&store, workers::STALE_AFTER).await {
                warn!(%error, "marking silent workers disconnected failed");
            }
            if session.is_none() {
                match store
                    .pool()
                    .connect_options()
                    .as_ref()
                    .clone()
                    .connect()
                    .await
                {
                    Ok(conn) => session = Some((conn, tokio::time::Instant::now())),
                    Err(error) => {
                        warn!(%error, "cannot open the recovery session");
                        continue;
                    }
                }
            }
            let Some((conn, since)) = session.as_mut() else {
                continue;
            };
            let scope = task_lifecycle::LostScope::All {
                limit: RECOVERY_BATCH,
            };
            let may_declare_dead = since.elapsed() >= workers::RESTART_GRACE;
            match task_lifecycle::recover_lost_attempts(
                conn,
                broker.topology(),
                scope,
                may_declare_dead,
            )
            .await
            {
                Ok(0) => {}
                Ok(recovered) => {
                    info!(recovered, "recovered attempts of vanished workers");
                    metrics::counter!("chime_scheduler_attempts_recovered_total")
                        .increment(recovered as u64);
                }
                Err(error) => {
                    warn!(%error, "recovering lost attempts failed; opening a new session");
                    session = None;
                }
            }
            if last_republish.elapsed() >= REPUBLISH_EVERY {
                last_republish = tokio::time::Instant::now();
                match republish(&store, &broker, republish_after).await {
                    Ok(0) => {}
                    Ok(republished) => {
                        warn!(
                            republished,
                            "published again the messages of ready tasks no worker started"
                        );
                        metrics::counter!("chime_scheduler_messages_republished_total")
                            .increment(republished as u64);
                    }
                    Err(error) => warn!(%error, "re-publishing stale ready tasks failed"),
                }
            }
        }
    }
    .instrument(info_span!("recovery"))
    .await
}

/// Re-publishes stale ready tasks of the groups whose queue holds no message (a queue with
/// messages may still hold theirs: a backlog must not be doubled).
async fn republish(
    store: &Store,
    broker: &Broker,
    older_than: Duration,
) -> Result<usize, StoreError> {
    let groups = task_lifecycle::groups_with_stale_ready(store, older_than).await?;
    if groups.is_empty() {
        return Ok(0);
    }
    let mut empty = Vec::new();
    for group in groups {
        let queue = broker.topology().group_queue(&group);
        match broker.queue_depth(&queue).await {
            Ok(Some(0)) => empty.push(group),
            Ok(Some(_)) => {}
            // No queue at all: whatever was in it is gone; the relay declares it again.
            Ok(None) => empty.push(group),
            Err(error) => warn!(%error, %queue, "cannot read the queue's depth"),
        }
    }
    if empty.is_empty() {
        return Ok(0);
    }
    task_lifecycle::republish_stale_ready(
        store,
        broker.topology(),
        &empty,
        older_than,
        REPUBLISH_BATCH,
    )
    .await
}
