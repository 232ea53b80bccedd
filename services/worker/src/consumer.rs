//! Where task messages are consumed: one consumer per worker-group queue (two per group: process
//! and inline tasks), on its own channel with the prefetch of that queue's slots, rebuilt
//! whenever the broker connection is.
//!
//! Each task message is handed to [`crate::delivery`] (a command to [`crate::control`]) in its own
//! task; the worker's semaphore bounds how many run at once. Submissions are collected into
//! batches and recorded by [`crate::submissions`] in the consumer's own loop. On shutdown the consumer is cancelled; deliveries not yet started
//! go back to the queue (nack with requeue) and the channel stays open until the running ones are
//! acked.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, BasicQosOptions, ConfirmSelectOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use crate::Worker;

/// Which handler a queue's deliveries go to.
#[derive(Clone, Copy, Debug)]
pub enum QueueKind {
    /// A worker group's queue of tasks that run as processes.
    Group,
    /// A worker group's queue of tasks the worker runs itself (noop, http).
    Inline,
    /// The `<prefix>.submit` queue of ad-hoc submissions.
    Submit,
    /// This worker's own command queue (`<prefix>.worker.<id>`).
    Control,
}

/// Consumes `queue` until shutdown, reconnecting as needed.
pub async fn consume(
    worker: Arc<Worker>,
    queue: String,
    kind: QueueKind,
    shutdown: CancellationToken,
) {
    let span = info_span!("consumer", %queue);
    async move {
        while let Some(conn) = worker.broker.connection(&shutdown).await {
            // Broker calls are raced with shutdown: on a connection that is dying they may never
            // answer, and a stopping worker must not wait for them.
            let opened = tokio::select! {
                _ = shutdown.cancelled() => return,
                opened = open(&worker, &conn, &queue, kind) => opened,
            };
            let channel = match opened {
                Ok(channel) => channel,
                Err(error) => {
                    warn!(%error, "cannot consume; retrying");
                    pause(&shutdown).await;
                    continue;
                }
            };
            let tag = format!("{}-{}", worker.identity.name, queue);
            let consume = channel.basic_consume(
                queue.clone().into(),
                tag.clone().into(),
                BasicConsumeOptions {
                    // A command is acted on at once or not at all (the heartbeat is the
                    // backstop), so it needs no ack.
                    no_ack: matches!(kind, QueueKind::Control),
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            );
            let consumed = tokio::select! {
                _ = shutdown.cancelled() => return,
                consumed = consume => consumed,
            };
            let mut consumer = match consumed {
                Ok(consumer) => consumer,
                Err(error) => {
                    warn!(%error, "basic.consume failed; retrying");
                    pause(&shutdown).await;
                    continue;
                }
            };
            info!("consuming");
            // For the submission queue: nothing of this channel left unacked on purpose yet.
            let mut settled = crate::submissions::Settled(true);
            loop {
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => {
                        // Running attempts hold clones of the channel and ack on it; it closes
                        // when the last of them is done.
                        let cancel = channel.basic_cancel(tag.into(), BasicCancelOptions::default());
                        let _ = tokio::time::timeout(Duration::from_secs(2), cancel).await;
                        return;
                    }
                    delivery = consumer.next() => match delivery {
                        Some(Ok(delivery)) if matches!(kind, QueueKind::Submit) => {
                            // Recorded here, not in a task of its own: the next batch waits in
                            // the prefetch while this one commits.
                            let (batch, broken) = collect_batch(&worker, &mut consumer, delivery).await;
                            metrics::counter!("chime_worker_deliveries_total", "queue" => queue.clone())
                                .increment(batch.len() as u64);
                            crate::submissions::handle_batch(&worker, channel.clone(), &queue, batch, &mut settled).await;
                            if broken {
                                warn!("consumer failed; waiting for the broker");
                                break;
                            }
                        }
                        Some(Ok(delivery)) => {
                            metrics::counter!("chime_worker_deliveries_total", "queue" => queue.clone()).increment(1);
                            worker.spawn_delivery(channel.clone(), queue.clone(), kind, delivery);
                        }
                        Some(Err(error)) => {
                            warn!(%error, "consumer failed; waiting for the broker");
                            break;
                        }
                        None => {
                            warn!("consumer stream ended; waiting for the broker");
                            break;
                        }
                    }
                }
            }
            pause(&shutdown).await;
        }
    }
    .instrument(span)
    .await;
}

/// The most bytes of submissions recorded together: a batch of large submissions stays well
/// within what one statement (and one outbox row) can carry.
const SUBMIT_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// The submissions that came with `first`: up to `submit_batch` of them (and
/// [`SUBMIT_BATCH_BYTES`]), or what arrived within `submit_batch_window_ms` of it. Also says
/// whether the consumer broke meanwhile.
async fn collect_batch(
    worker: &Worker,
    consumer: &mut lapin::Consumer,
    first: lapin::message::Delivery,
) -> (Vec<lapin::message::Delivery>, bool) {
    let (size, window) = worker.submit_batch;
    let deadline = tokio::time::Instant::now() + window;
    let mut bytes = first.data.len();
    let mut batch = vec![first];
    while batch.len() < size && bytes < SUBMIT_BATCH_BYTES {
        match tokio::time::timeout_at(deadline, consumer.next()).await {
            Ok(Some(Ok(delivery))) => {
                bytes += delivery.data.len();
                batch.push(delivery);
            }
            Ok(Some(Err(_)) | None) => return (batch, true),
            Err(_) => break,
        }
    }
    (batch, false)
}

async fn open(
    worker: &Worker,
    conn: &Connection,
    queue: &str,
    kind: QueueKind,
) -> lapin::Result<Channel> {
    let channel = conn.create_channel().await?;
    // Confirms: dead letters published on this channel must be safe before the original is acked.
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    // Two batches of submissions: one being recorded, the next arriving meanwhile.
    let prefetch = match kind {
        QueueKind::Submit => u16::try_from(worker.submit_batch.0 * 2).unwrap_or(u16::MAX),
        QueueKind::Inline => worker.inline_prefetch,
        QueueKind::Group | QueueKind::Control => worker.prefetch,
    };
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await?;
    match kind {
        QueueKind::Group | QueueKind::Inline => {
            let group = worker.topology().group_of_queue(queue).unwrap_or(queue);
            worker.topology().declare_group(&channel, group).await?;
        }
        QueueKind::Control => {
            worker
                .topology()
                .declare_worker_queue(&channel, &worker.identity.id.to_string())
                .await?;
        }
        QueueKind::Submit => {}
    }
    Ok(channel)
}

async fn pause(shutdown: &CancellationToken) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
    }
}
