//! chime-dependency: the dependency service (docs/ARCHITECTURE.md, section 6).
//!
//! It consumes `<prefix>.dependencies`, the queue of task events for ended and waiting tasks,
//! and for each one advances the downstream jobs whose upstream runs are now complete
//! ([`advance`]), and the backfill the task belongs to. Run any number of them: each (job, data
//! time) advances once. Events are acked after the advance commits; one that cannot be handled
//! now (the database is unreachable) is held until it can, one that does not parse is
//! dead-lettered. [`sweep`] re-derives from the database what lost events would have done.

pub mod advance;
pub mod outcomes;
pub mod sweep;

use std::sync::Arc;
use std::time::Duration;

use chime_core::Node;
use chime_core::bus::dead_letter;
use chime_core::model::TaskEvent;
use chime_core::model::message::decode;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions, ConfirmSelectOptions,
};
use lapin::types::FieldTable;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info, info_span, warn};

/// How many events are handled at once.
const CONCURRENCY: u16 = 16;

/// How long an event in hand at shutdown may still take before it goes back to the queue.
const HANDLING_GRACE: Duration = Duration::from_secs(5);

/// Runs the dependency service on `node` until `shutdown`, then finishes the events in hand.
pub async fn run(node: &Node, shutdown: CancellationToken) {
    chime_core::telemetry::catalog::register_at_zero(
        chime_core::telemetry::catalog::Role::Dependency,
        &[],
        &[],
    );
    let check_in = chime_core::store::services::CheckIn::new(
        &node.store,
        "dependency",
        chime_core::store::services::instance_id(),
        chime_core::store::services::CHECKIN_INTERVAL,
    );
    let checkins = tokio::spawn(check_in.run(shutdown.clone()));
    let sweeper = tokio::spawn(sweep::run(
        node.store.clone(),
        node.broker.topology().clone(),
        shutdown.clone(),
    ));
    consume(node, shutdown).await;
    let _ = sweeper.await;
    let _ = checkins.await;
}

/// Consumes task events until `shutdown`.
async fn consume(node: &Node, shutdown: CancellationToken) {
    let queue = node.broker.topology().dependencies_queue();
    let handling = TaskTracker::new();
    let outcomes = Arc::new(outcomes::JobOutcomes::default());
    if let Err(error) = outcomes.register_existing(&node.store).await {
        warn!(%error, "cannot read the jobs; their outcome counts appear with their first end");
    }
    let slots = Arc::new(Semaphore::new(usize::from(CONCURRENCY)));
    async {
        while let Some(conn) = node.broker.connection(&shutdown).await {
            // Raced with shutdown: on a dying connection these calls may never be answered.
            let consumer = async {
                let channel = conn.create_channel().await?;
                channel
                    .confirm_select(ConfirmSelectOptions::default())
                    .await?;
                channel
                    .basic_qos(CONCURRENCY, BasicQosOptions::default())
                    .await?;
                let consumer = channel
                    .basic_consume(
                        queue.clone().into(),
                        format!("dependency-{}", std::process::id()).into(),
                        BasicConsumeOptions::default(),
                        FieldTable::default(),
                    )
                    .await?;
                Ok::<_, lapin::Error>((channel, consumer))
            };
            let consumer = tokio::select! {
                _ = shutdown.cancelled() => break,
                consumer = consumer => consumer,
            };
            let (channel, mut consumer) = match consumer {
                Ok(consumer) => consumer,
                Err(error) => {
                    warn!(%error, "cannot consume; retrying");
                    pause(&shutdown).await;
                    continue;
                }
            };
            info!("consuming task events");
            loop {
                let delivery = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    delivery = consumer.next() => delivery,
                };
                let delivery = match delivery {
                    Some(Ok(delivery)) => delivery,
                    Some(Err(error)) => {
                        warn!(%error, "consumer failed; waiting for the broker");
                        break;
                    }
                    None => break,
                };
                let slot = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    slot = slots.clone().acquire_owned() => slot,
                };
                let Ok(slot) = slot else {
                    break;
                };
                let (store, topology, channel, queue, stop, outcomes) = (
                    node.store.clone(),
                    node.broker.topology().clone(),
                    channel.clone(),
                    queue.clone(),
                    shutdown.clone(),
                    outcomes.clone(),
                );
                handling.spawn(async move {
                    let _slot = slot;
                    let event = match decode::<TaskEvent>(&delivery.data) {
                        Ok(event) => event,
                        Err(error) => {
                            warn!(%error, "dead-lettering an event that does not parse");
                            if dead_letter(&channel, &topology, &queue, &delivery.data, &error.to_string())
                                .await
                                .is_ok()
                            {
                                let _ = delivery.acker.ack(BasicAckOptions::default()).await;
                            }
                            return;
                        }
                    };
                    let started = std::time::Instant::now();
                    // While the database is unreachable the event is held, not requeued: the
                    // prefetch fills and the broker stops delivering, so no requeue loop spends
                    // the queue's delivery limit. At shutdown it goes back to the queue.
                    let mut delay = Duration::from_millis(100);
                    let requeue = BasicNackOptions {
                        requeue: true,
                        ..BasicNackOptions::default()
                    };
                    loop {
                        // An advance under way at shutdown gets HANDLING_GRACE to finish, then
                        // is dropped: one waiting for a connection or a lock on a loaded
                        // database must not hold the service's stop. Dropped, its transaction
                        // rolls back; the event comes back, and advancing is idempotent. Each
                        // such return counts toward the queue's delivery limit; an event that
                        // reaches it is dead-lettered, and the sweep advances what it would have.
                        let given_up = async {
                            stop.cancelled().await;
                            tokio::time::sleep(HANDLING_GRACE).await;
                        };
                        let advanced = tokio::select! {
                            biased;
                            advanced = advance::on_event(&store, &topology, &event) => advanced,
                            () = given_up => {
                                let _ = delivery.acker.nack(requeue).await;
                                return;
                            }
                        };
                        match advanced {
                            Ok(()) => {
                                metrics::histogram!("chime_dependency_event_seconds")
                                    .record(started.elapsed());
                                if let Err(error) = outcomes.count(&store, &event).await {
                                    warn!(%error, "cannot count the task's end");
                                }
                                let _ = delivery.acker.ack(BasicAckOptions::default()).await;
                                return;
                            }
                            Err(error) => {
                                warn!(%error, task_id = %event.task_id, ?delay, "cannot advance now; waiting for the database");
                            }
                        }
                        tokio::select! {
                            _ = stop.cancelled() => {
                                let _ = delivery.acker.nack(requeue).await;
                                return;
                            }
                            _ = tokio::time::sleep(delay) => {}
                        }
                        delay = (delay * 2).min(Duration::from_secs(5));
                    }
                });
            }
            pause(&shutdown).await;
        }
        // Events in hand finish (or, on a broker that no longer answers, are left unacked: they
        // come back, and advancing is idempotent).
        handling.close();
        if tokio::time::timeout(Duration::from_secs(10), handling.wait())
            .await
            .is_err()
        {
            warn!("events still in hand at shutdown; they will be redelivered");
        }
    }
    .instrument(info_span!("dependency_service"))
    .await
}

async fn pause(shutdown: &CancellationToken) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
    }
}
