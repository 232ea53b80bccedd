//! Publishing with publisher confirms, and dead-lettering poison messages.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use lapin::PublisherConfirm;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Confirmation};

use super::Topology;

/// A publish that did not reach the broker's safekeeping.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The channel or connection failed.
    #[error("AMQP: {0}")]
    Amqp(#[from] lapin::Error),
    /// The broker refused the message (nack).
    #[error("the broker refused the message (nack)")]
    Nacked,
    /// No connection to the broker now.
    #[error("the broker is not reachable now")]
    Unavailable,
    /// The message could not be routed to any queue.
    #[error("no queue is bound for {exchange} / {routing_key}")]
    Unroutable {
        /// Exchange.
        exchange: String,
        /// Routing key.
        routing_key: String,
    },
}

/// The properties of every chime message: persistent JSON.
pub fn message_properties(headers: FieldTable) -> BasicProperties {
    BasicProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_headers(headers)
}

/// A publish whose frames are queued on its channel: awaiting it waits for them to be written,
/// and then gives the confirm to wait for.
pub type QueuedPublish<'a> =
    Pin<Box<dyn Future<Output = lapin::Result<PublisherConfirm>> + Send + 'a>>;

/// Starts a publish and returns once its frames are queued on the channel, before they are
/// written, or the channel's error at once. Messages queued one after another go out in that
/// order (each takes its delivery tag and queues its frames here), and lapin's I/O loop writes
/// what has queued up together. Awaiting each `basic_publish` instead (which resolves only once
/// its frames are written) costs a wake of that loop and a socket write per message: the outbox
/// relay spent that on every task message and event.
pub fn queue_publish<'a>(
    channel: &'a Channel,
    exchange: &str,
    routing_key: &str,
    options: BasicPublishOptions,
    body: &'a [u8],
    properties: BasicProperties,
) -> lapin::Result<QueuedPublish<'a>> {
    let mut publish: QueuedPublish<'a> = Box::pin(channel.basic_publish(
        exchange.into(),
        routing_key.into(),
        options,
        body,
        properties,
    ));
    // `basic_publish` runs up to its wait for the write on its first poll: the frames are
    // queued then. The waker given here is replaced by the caller's when it awaits.
    match publish
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(Ok(confirm)) => Ok(Box::pin(std::future::ready(Ok(confirm)))),
        Poll::Ready(Err(error)) => Err(error),
        Poll::Pending => Ok(publish),
    }
}

/// Publishes one message (mandatory, persistent) and waits for the broker's confirm. The channel
/// must be in confirm mode.
pub async fn publish_confirmed(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    headers: FieldTable,
) -> Result<(), BusError> {
    let confirm = channel
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            body,
            message_properties(headers),
        )
        .await?
        .await?;
    check_confirmation(confirm, exchange, routing_key)
}

/// Turns a confirmation into success, or the reason the message is not safe.
pub fn check_confirmation(
    confirm: Confirmation,
    exchange: &str,
    routing_key: &str,
) -> Result<(), BusError> {
    match confirm {
        Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
        Confirmation::Ack(Some(_returned)) => Err(BusError::Unroutable {
            exchange: exchange.to_string(),
            routing_key: routing_key.to_string(),
        }),
        Confirmation::Nack(_) => Err(BusError::Nacked),
    }
}

/// Answers a message whose publisher asked for it (`reply_to`, the AMQP RPC pattern; RabbitMQ's
/// direct reply-to `amq.rabbitmq.reply-to.*` included): `body` to that queue through the default
/// exchange, with the request's `correlation_id`. Transient and not mandatory: a reply queue
/// that is gone (its publisher left) drops the answer, as it should. The channel must be in
/// confirm mode.
pub async fn reply(
    channel: &Channel,
    reply_to: &str,
    correlation_id: Option<&str>,
    body: &[u8],
) -> Result<(), BusError> {
    let mut properties = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(1);
    if let Some(id) = correlation_id {
        properties = properties.with_correlation_id(id.into());
    }
    let confirm = channel
        .basic_publish(
            "".into(),
            reply_to.into(),
            BasicPublishOptions::default(),
            body,
            properties,
        )
        .await?
        .await?;
    check_confirmation(confirm, "", reply_to)
}

/// Sends a message that cannot be used to the dead-letter exchange, with the reason and where it
/// came from in its headers. The caller acks the original afterwards.
pub async fn dead_letter(
    channel: &Channel,
    topology: &Topology,
    source_queue: &str,
    body: &[u8],
    reason: &str,
) -> Result<(), BusError> {
    let mut headers = FieldTable::default();
    headers.insert(
        "x-chime-reason".into(),
        AMQPValue::LongString(LongString::from(reason)),
    );
    headers.insert(
        "x-chime-source-queue".into(),
        AMQPValue::LongString(LongString::from(source_queue)),
    );
    publish_confirmed(channel, &topology.dead_exchange(), "", body, headers).await
}
