//! Where the attempts of dead workers are recovered, and lost task messages published again.
//!
//! Every [`workers::HEARTBEAT_INTERVAL`] one instance at a time (an advisory lock) declares dead
//! the workers whose lease has expired by the database's clock and who hold no refusal grace,
//! and recovers their attempts (`task_lifecycle::recover_lost_attempts`): a worker killed with
//! -9, or frozen, is dead about a second after its lease expired ([`grace::ABSENT_FOR`] after its
//! grace mark was first seen absent, looking from [`grace::LOOK_BEFORE_EXPIRY`] before the
//! expiry), when its guard has killed its attempts' processes already. One that PostgreSQL
//! refuses while it holds its lease keeps a mark on the broker and is dead only once the mark is
//! gone, or [`workers::RESTART_GRACE`] after its lease expired. Right after the database itself restarted or recovered from a crash nobody
//! is declared dead for [`workers::RESTART_GRACE`]; a scheduler that has just started needs no
//! grace of its own.
//!
//! Tasks a worker took at submission (`task_lifecycle::submit_routed_taking`) have no message
//! until it starts them: once a second, those of workers that are gone, or taken longer than
//! [`TAKEN_PUBLISH_AFTER`] ago, have theirs published (`task_lifecycle::publish_unstarted_taken`).
//!
//! Two backstops publish task messages again, for ready tasks no worker started, in task queues
//! (a group's process or inline queue) that hold no message
//! (`task_lifecycle::republish_stale_ready`). Tasks that recovery made
//! ready get theirs again every [`RECOVERED_REPUBLISH_AFTER`]: their message may sit
//! unacknowledged in the consumer of the frozen worker they were taken from, which the broker
//! believes alive until its connection times out. Every other ready task gets its message again
//! after `republish_after`: whatever the bus lost — a message dead-lettered during an outage, a
//! deleted queue — the row brings back.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chime_core::bus::{Broker, grace};
use chime_core::store::{Store, StoreError, task_lifecycle, workers};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};
use uuid::Uuid;

/// How many attempts one pass recovers at most.
const RECOVERY_BATCH: i64 = 1000;
/// How many ready tasks one pass re-publishes at most.
const REPUBLISH_BATCH: i64 = 1000;
/// How often the re-publish pass runs.
const REPUBLISH_EVERY: Duration = Duration::from_secs(5);
/// How long a recovered task may wait unstarted before its message is published again.
pub const RECOVERED_REPUBLISH_AFTER: Duration = Duration::from_secs(2);
/// How long a task taken at submission may wait for its worker, alive, to start it before its
/// message is published (it starts within milliseconds unless the worker lost the answer to its
/// commit; a copy too many is harmless).
const TAKEN_PUBLISH_AFTER: Duration = Duration::from_secs(10);

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
    let mut last_second = tokio::time::Instant::now();
    let mut absent_since = HashMap::new();
    async {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // A pass waits on the database (up to the pool's timeout per step while it is
            // away); a stopping scheduler does not wait for it.
            let pass = async {
                match recover(&store, &broker, &mut absent_since).await {
                    Ok(0) => {}
                    Ok(recovered) => {
                        info!(recovered, "recovered attempts of vanished workers");
                        metrics::counter!("chime_scheduler_attempts_recovered_total")
                            .increment(recovered as u64);
                    }
                    Err(error) => warn!(%error, "recovering lost attempts failed"),
                }
                // Not every tick: what follows needs no sub-second answer.
                if last_second.elapsed() < Duration::from_secs(1) {
                    return;
                }
                last_second = tokio::time::Instant::now();
                if let Err(error) = workers::mark_disconnected(&store, workers::STALE_AFTER).await {
                    warn!(%error, "marking silent workers disconnected failed");
                }
                match task_lifecycle::publish_unstarted_taken(
                    &store,
                    broker.topology(),
                    TAKEN_PUBLISH_AFTER,
                    REPUBLISH_BATCH,
                )
                .await
                {
                    Ok(0) => {}
                    Ok(published) => {
                        store.outbox_written();
                        info!(
                            published,
                            "published the messages of tasks taken at submission by workers that are gone or did not start them"
                        );
                        metrics::counter!("chime_scheduler_taken_published_total")
                            .increment(published as u64);
                    }
                    Err(error) => warn!(%error, "publishing unstarted taken tasks failed"),
                }
                match republish(&store, &broker, RECOVERED_REPUBLISH_AFTER, true).await {
                    Ok(0) => {}
                    Ok(republished) => {
                        info!(
                            republished,
                            "published again the messages of recovered tasks no worker started"
                        );
                        metrics::counter!("chime_scheduler_messages_republished_total")
                            .increment(republished as u64);
                    }
                    Err(error) => warn!(%error, "re-publishing recovered tasks failed"),
                }
                if last_republish.elapsed() >= REPUBLISH_EVERY {
                    last_republish = tokio::time::Instant::now();
                    match republish(&store, &broker, republish_after, false).await {
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
            };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                () = pass => {}
            }
        }
    }
    .instrument(info_span!("recovery"))
    .await
}

/// When this process first saw a worker's refusal-grace mark absent, by worker and the end of
/// the lease it was looked for at: a lease renewed in between (a worker that came back, then
/// stalled again) starts its count afresh, even if no pass saw it renewed.
type AbsentSince = HashMap<(Uuid, jiff::Timestamp), Instant>;

/// Looks for the refusal-grace mark of each worker whose lease ends (see
/// `chime_core::bus::grace`), keeping in `absent_since` when this process first saw each one's
/// absent; returns the workers whose mark has been absent long enough to declare them dead.
async fn unmarked_workers(
    store: &Store,
    broker: &Broker,
    absent_since: &mut AbsentSince,
) -> Result<Vec<Uuid>, StoreError> {
    let ending = workers::lease_ending(store, grace::LOOK_BEFORE_EXPIRY).await?;
    absent_since.retain(|lease, _| ending.contains(lease));
    let connection = broker.current();
    // Asked all at once: each question may take up to its timeout on a broker in trouble.
    let answers = futures::future::join_all(ending.iter().map(|(id, _)| {
        let connection = connection.clone();
        async move {
            match connection {
                Some(connection) => {
                    grace::present(&connection, broker.topology(), &id.to_string()).await
                }
                None => None,
            }
        }
    }))
    .await;
    for (lease, present) in ending.iter().zip(answers) {
        // A mark there, or a broker that cannot say: the worker may be holding a grace.
        if present == Some(false) {
            absent_since.entry(*lease).or_insert_with(Instant::now);
        } else {
            absent_since.remove(lease);
        }
    }
    Ok(absent_since
        .iter()
        .filter(|(_, since)| since.elapsed() >= grace::ABSENT_FOR)
        .map(|((id, _), _)| *id)
        .collect())
}

/// One recovery pass on a connection of the pool.
async fn recover(
    store: &Store,
    broker: &Broker,
    absent_since: &mut AbsentSince,
) -> Result<usize, StoreError> {
    let unmarked = unmarked_workers(store, broker, absent_since).await?;
    let mut conn = store
        .pool()
        .acquire()
        .await
        .map_err(|source| StoreError::Database {
            context: "acquiring a connection",
            source,
        })?;
    let recovered = task_lifecycle::recover_lost_attempts(
        &mut conn,
        broker.topology(),
        task_lifecycle::LostScope::All {
            limit: RECOVERY_BATCH,
        },
        Some(&unmarked),
    )
    .await?;
    if recovered > 0 {
        // Re-runs and events are in the outbox: this process's relay publishes them now.
        store.outbox_written();
    }
    Ok(recovered)
}

/// Re-publishes stale ready tasks of the task queues that hold no message (a queue with messages
/// may still hold theirs: a backlog must not be doubled).
async fn republish(
    store: &Store,
    broker: &Broker,
    older_than: Duration,
    only_recovered: bool,
) -> Result<usize, StoreError> {
    let queues = task_lifecycle::queues_with_stale_ready(store, older_than, only_recovered).await?;
    if queues.is_empty() {
        return Ok(0);
    }
    let mut empty = Vec::new();
    for stale in queues {
        let queue = if stale.inline {
            broker.topology().inline_queue(&stale.group)
        } else {
            broker.topology().group_queue(&stale.group)
        };
        match broker.queue_depth(&queue).await {
            Ok(Some(0)) => empty.push(stale),
            Ok(Some(_)) => {}
            // No queue at all: whatever was in it is gone; the relay declares it again.
            Ok(None) => empty.push(stale),
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
        only_recovered,
        REPUBLISH_BATCH,
    )
    .await
}
