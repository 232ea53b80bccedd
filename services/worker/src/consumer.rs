//! Where task messages are consumed: one consumer per worker-group queue, on its own channel with
//! the worker's prefetch, rebuilt whenever the broker connection is.
//!
//! Each delivery is handed to [`crate::delivery`] (or [`crate::control`]) in its own task; the worker's semaphore
//! bounds how many run at once. On shutdown the consumer is cancelled; deliveries not yet started
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
    /// A worker group's task queue.
    Group,
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
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => {
                        // Running attempts hold clones of the channel and ack on it; it closes
                        // when the last of them is done.
                        let cancel = channel.basic_cancel(tag.into(), BasicCancelOptions::default());
                        let _ = tokio::time::timeout(Duration::from_secs(2), cancel).await;
                        return;
                    }
                    delivery = consumer.next() => match delivery {
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
    channel
        .basic_qos(worker.prefetch, BasicQosOptions::default())
        .await?;
    match kind {
        QueueKind::Group => {
            let group = queue
                .strip_prefix(&format!("{}.group.", worker.topology().prefix()))
                .unwrap_or(queue);
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
