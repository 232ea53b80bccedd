//! The outbox relay: publishes the outbox's unsent rows with confirms and marks them sent.
//!
//! ```text
//!   claim rows due within 50 ms (lease) ──▶ publish each at its time, pipelined
//!          ──▶ await confirms ──▶ mark sent
//!          ▲                                                    │ nack / broker gone
//!          └── own writes, NOTIFY <schema>.outbox, or the poll ◀── release the lease
//! ```
//!
//! A crash anywhere between the claim and the mark re-publishes after the lease expires; consumers
//! are idempotent per (task, attempt), so that costs a duplicate message, never a second run.
//! Several relays (one per process) share the table through `FOR UPDATE SKIP LOCKED` leases.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Connection};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

use super::publish::{BusError, check_confirmation, message_properties, queue_publish};
use super::{Broker, Topology};
use crate::store::notify;
use crate::store::outbox::{self, OutboxMessage};
use crate::store::{Store, StoreError};

/// Rows claimed per round trip.
const BATCH: i64 = 2000;
/// How long a claim protects rows from other relays.
const LEASE: Duration = Duration::from_secs(30);
/// Rows due this soon are claimed now and published at their time. Short, because a message
/// committed meanwhile (an ad-hoc task) waits behind the held ones at most this long.
const AHEAD: Duration = Duration::from_millis(50);
/// The backstop when no NOTIFY arrives.
const POLL: Duration = Duration::from_secs(1);
/// How long published rows are kept as history.
const RETENTION: Duration = Duration::from_secs(3600);
/// How often published rows are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Publishes the outbox of one store through one broker.
#[derive(Debug)]
pub struct OutboxRelay {
    store: Store,
    broker: Broker,
    listens: bool,
}

enum Round {
    /// Published this many; go again at once if the batch was full.
    Published(usize),
    /// The channel is unusable: get a new connection.
    BrokerLost(BusError),
}

impl OutboxRelay {
    /// A relay for `store` publishing through `broker`. It wakes when its own process writes
    /// outbox rows ([`Store::outbox_written`]), at the poll backstop, and, if it `listens`, on
    /// the NOTIFY of any process's rows (a connection of its own).
    pub fn new(store: Store, broker: Broker, listens: bool) -> Self {
        Self {
            store,
            broker,
            listens,
        }
    }

    /// Runs until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        self.run_inner(shutdown)
            .instrument(info_span!("outbox_relay"))
            .await
    }

    async fn run_inner(self, shutdown: CancellationToken) {
        let mut listener = if self.listens {
            Some(notify::Listener::open(&self.store, &self.store.outbox_channel()).await)
        } else {
            None
        };
        let mut last_prune = Instant::now();
        'connection: while let Some(conn) = self.broker.connection(&shutdown).await {
            let channel = match confirm_channel(&conn).await {
                Ok(channel) => channel,
                Err(error) => {
                    warn!(%error, "cannot open a confirm channel; waiting for the broker");
                    self.pause(&shutdown).await;
                    continue;
                }
            };
            // Queues this channel declared: a task message is never published to a group no
            // queue is bound for, even before any worker of that group started.
            let mut declared_groups = HashSet::new();
            loop {
                if shutdown.is_cancelled() {
                    break 'connection;
                }
                // A stopping relay lets a round finish for a moment, not for the pool's timeout
                // while the database is away: rows it claimed come back when their lease ends.
                let stopping = async {
                    shutdown.cancelled().await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                };
                let round = tokio::select! {
                    biased;
                    round = self.publish_round(&channel, &mut declared_groups) => round,
                    () = stopping => break 'connection,
                };
                match round {
                    Ok(Round::Published(n)) if n as i64 >= BATCH => continue,
                    Ok(Round::Published(_)) => {}
                    Ok(Round::BrokerLost(error)) => {
                        warn!(%error, "publishing failed; waiting for the broker");
                        self.pause(&shutdown).await;
                        continue 'connection;
                    }
                    Err(error) => {
                        warn!(%error, "outbox relay database error");
                        self.pause(&shutdown).await;
                    }
                }
                if last_prune.elapsed() >= PRUNE_EVERY {
                    last_prune = Instant::now();
                    match outbox::prune_published(&self.store, RETENTION, 10_000).await {
                        Ok(n) if n > 0 => debug!(rows = n, "pruned published outbox rows"),
                        Ok(_) => {}
                        Err(error) => warn!(%error, "pruning the outbox failed"),
                    }
                }
                self.wait_for_work(&mut listener, &shutdown).await;
            }
        }
        let _ = listener;
    }

    /// Sleeps until the earliest held row is due, a NOTIFY, the poll interval, or shutdown. A
    /// listener that lost its connection wakes the relay too, and again once it listens anew;
    /// whatever was missed meanwhile is found by the next scan.
    async fn wait_for_work(
        &self,
        listener: &mut Option<notify::Listener>,
        shutdown: &CancellationToken,
    ) {
        let sleep = match outbox::until_next_due(&self.store).await {
            Ok(Some(until)) => until.saturating_sub(AHEAD).min(POLL),
            Ok(None) => POLL,
            Err(error) => {
                debug!(%error, "cannot find the next due outbox row");
                POLL
            }
        };
        if sleep.is_zero() {
            return;
        }
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(sleep) => {}
            _ = async {
                match listener.as_mut() {
                    Some(listener) => listener.notified().await,
                    None => std::future::pending().await,
                }
            } => {}
            _ = self.store.outbox_hint() => {}
        }
    }

    async fn pause(&self, shutdown: &CancellationToken) {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }

    async fn publish_round(
        &self,
        channel: &Channel,
        declared_groups: &mut HashSet<String>,
    ) -> Result<Round, StoreError> {
        let mut batch = outbox::claim_due(&self.store, BATCH, LEASE, AHEAD).await?;
        batch.sort_by(|a, b| {
            a.wait_seconds
                .total_cmp(&b.wait_seconds)
                .then(a.id.cmp(&b.id))
        });
        if batch.is_empty() {
            return Ok(Round::Published(0));
        }
        let topology = self.broker.topology();
        let (expanded, broken) = expand(&batch);
        outbox::release(&self.store, &broken).await?;
        if let Err(error) = declare_groups(channel, topology, &expanded, declared_groups).await {
            outbox::release(&self.store, &ids(&batch)).await?;
            return Ok(Round::BrokerLost(error.into()));
        }
        let started = Instant::now();
        let (published, failed, broker_error) = publish_batch(channel, topology, &expanded).await;
        outbox::mark_published(&self.store, &published).await?;
        outbox::release(&self.store, &failed).await?;
        record_fire_lag(&batch, &published);
        metrics::counter!("chime_outbox_published_total").increment(published.len() as u64);
        metrics::histogram!("chime_outbox_publish_seconds").record(started.elapsed());
        if !failed.is_empty() {
            metrics::counter!("chime_outbox_publish_failures_total").increment(failed.len() as u64);
        }
        Ok(match broker_error {
            Some(error) => Round::BrokerLost(error),
            None => Round::Published(published.len()),
        })
    }
}

/// The header a trigger fire's message carries: its scheduled time.
pub const SCHEDULED_TIME_HEADER: &str = "x-chime-scheduled-time";

/// For each trigger fire published, how late it went out: from its scheduled time to the
/// broker's confirm (both on the database's clock), by worker group.
fn record_fire_lag(batch: &[OutboxMessage], published: &[(i64, jiff::Timestamp)]) {
    let fires: HashMap<i64, (&str, jiff::Timestamp)> = batch
        .iter()
        .filter_map(|row| {
            let scheduled = row.headers.0.get(SCHEDULED_TIME_HEADER)?.as_str()?;
            let scheduled = scheduled.parse::<jiff::Timestamp>().ok()?;
            Some((row.id, (row.routing_key.as_str(), scheduled)))
        })
        .collect();
    if fires.is_empty() {
        return;
    }
    for (id, at) in published {
        if let Some((group, scheduled)) = fires.get(id) {
            let lag = at.duration_since(*scheduled).as_secs_f64().max(0.0);
            metrics::histogram!("chime_fire_lag_seconds", "worker_group" => group.to_string())
                .record(lag);
        }
    }
}

async fn confirm_channel(conn: &Connection) -> lapin::Result<Channel> {
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok(channel)
}

async fn declare_groups(
    channel: &Channel,
    topology: &Topology,
    batch: &[Expanded<'_>],
    declared: &mut HashSet<String>,
) -> lapin::Result<()> {
    let tasks_exchange = topology.tasks_exchange();
    for row in batch {
        if row.row.exchange != tasks_exchange {
            continue;
        }
        for (routing_key, _) in &row.messages {
            if !declared.contains(routing_key.as_ref()) {
                topology.declare_group(channel, routing_key).await?;
                declared.insert(routing_key.to_string());
            }
        }
    }
    Ok(())
}

/// A claimed row with the messages it publishes.
struct Expanded<'a> {
    row: &'a OutboxMessage,
    messages: Vec<outbox::Message<'a>>,
}

/// Expands claimed rows into their messages; a row whose batch does not parse (it cannot: the
/// store writes them) is logged and left for a later round.
fn expand(batch: &[OutboxMessage]) -> (Vec<Expanded<'_>>, Vec<i64>) {
    let mut expanded = Vec::with_capacity(batch.len());
    let mut broken = Vec::new();
    for row in batch {
        match row.messages() {
            Ok(messages) => expanded.push(Expanded { row, messages }),
            Err(error) => {
                warn!(id = row.id, %error, "outbox row's batch does not parse; left unsent");
                broken.push(row.id);
            }
        }
    }
    (expanded, broken)
}

/// What became of a batch: rows confirmed (with when), rows to retry, and the channel error that
/// ended it, if one did.
#[derive(Default)]
struct Outcomes {
    published: Vec<(i64, jiff::Timestamp)>,
    failed: Vec<i64>,
    broker_error: Option<BusError>,
}

impl Outcomes {
    /// Notes a confirm as it arrives, stamped on the database's clock (the claim's `now()` plus
    /// the time since).
    fn record(
        &mut self,
        claimed_at: tokio::time::Instant,
        message: &OutboxMessage,
        outcome: Result<(), BusError>,
    ) {
        match outcome {
            Ok(()) => {
                let elapsed =
                    jiff::SignedDuration::try_from(claimed_at.elapsed()).unwrap_or_default();
                let claimed = message.claimed_at.to_jiff();
                let at = claimed.saturating_add(elapsed).unwrap_or(claimed);
                self.published.push((message.id, at));
            }
            // Unroutable rows cannot be fixed by retrying at once, but they can be by a later
            // declaration; keep them and say so.
            Err(BusError::Unroutable {
                exchange,
                routing_key,
            }) => {
                warn!(id = message.id, %exchange, %routing_key, "outbox message unroutable; will retry");
                self.failed.push(message.id);
            }
            Err(BusError::Nacked) => self.failed.push(message.id),
            Err(error @ (BusError::Amqp(_) | BusError::Unavailable)) => {
                self.failed.push(message.id);
                self.broker_error.get_or_insert(error);
            }
        }
    }
}

/// Publishes every message (each at its time) without waiting for its write or its confirm in
/// between ([`queue_publish`], at most [`QUEUED_WRITES`] unwritten); confirms are noted as they
/// arrive, also while later messages wait for their time. A row is published when all its
/// messages are confirmed. Task messages are mandatory (a task that reaches no queue would be
/// lost); events and commands may have no listener.
async fn publish_batch(
    channel: &Channel,
    topology: &Topology,
    batch: &[Expanded<'_>],
) -> (Vec<(i64, jiff::Timestamp)>, Vec<i64>, Option<BusError>) {
    let mut outcomes = Outcomes::default();
    let tasks_exchange = topology.tasks_exchange();
    let events_exchange = topology.events_exchange();
    let claimed_at = tokio::time::Instant::now();
    // Per row: confirms still awaited, and the first failure.
    let mut remaining: Vec<usize> = batch.iter().map(|r| r.messages.len()).collect();
    let mut errors: Vec<Option<BusError>> = batch.iter().map(|_| None).collect();
    let mut confirms = FuturesUnordered::new();
    // Queued publishes whose writes are awaited in order, each with its row and route.
    let mut writes = std::collections::VecDeque::new();
    let settle = |index: usize,
                  outcome: Result<(), BusError>,
                  remaining: &mut Vec<usize>,
                  errors: &mut Vec<Option<BusError>>,
                  outcomes: &mut Outcomes| {
        if let Err(error) = outcome {
            errors[index].get_or_insert(error);
        }
        remaining[index] = remaining[index].saturating_sub(1);
        if remaining[index] == 0 {
            let outcome = errors[index].take().map_or(Ok(()), Err);
            outcomes.record(claimed_at, batch[index].row, outcome);
        }
    };
    for (index, row) in batch.iter().enumerate() {
        let message = row.row;
        if remaining[index] == 0 {
            // An empty batch publishes nothing and is done.
            outcomes.record(claimed_at, message, Ok(()));
            continue;
        }
        if outcomes.broker_error.is_some() {
            outcomes.failed.push(message.id);
            continue;
        }
        // A message held for its time (a trigger fire) goes out at that time, not before.
        if message.wait_seconds > 0.0 {
            let due = claimed_at + Duration::from_secs_f64(message.wait_seconds);
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(due) => break,
                    Some((done, outcome)) = confirms.next() => {
                        settle(done, outcome, &mut remaining, &mut errors, &mut outcomes);
                    }
                }
            }
        }
        for (sent_so_far, (routing_key, body)) in row.messages.iter().enumerate() {
            let mut headers = headers(message);
            if message.exchange == events_exchange
                && let Some(key) = topology.dependency_routing_key(routing_key, body)
            {
                headers.insert(
                    "BCC".into(),
                    AMQPValue::FieldArray(vec![AMQPValue::LongString(key.into())].into()),
                );
            }
            // A task message is recorded under its group; its kind picks the group's queue.
            let routing_key = if message.exchange == tasks_exchange {
                topology.task_routing_key(routing_key, body)
            } else {
                std::borrow::Cow::Borrowed(routing_key.as_ref())
            };
            let sent = queue_publish(
                channel,
                &message.exchange,
                routing_key.as_ref(),
                BasicPublishOptions {
                    mandatory: message.exchange == tasks_exchange,
                    ..BasicPublishOptions::default()
                },
                body.as_bytes(),
                message_properties(headers),
            );
            match sent {
                Ok(queued) => {
                    // Frames not yet written are held in memory: a large backlog goes out a
                    // window at a time, not all queued at once.
                    if writes.len() >= QUEUED_WRITES
                        && let Some((i, exchange, key, write)) = writes.pop_front()
                    {
                        confirms.push(confirmed(i, exchange, key, write.await));
                    }
                    writes.push_back((index, message.exchange.as_str(), routing_key, queued));
                }
                Err(error) => {
                    // The row fails as a whole; its unsent messages will not be confirmed.
                    errors[index].get_or_insert(BusError::from(error.clone()));
                    outcomes.broker_error = Some(BusError::from(error));
                    let unsent = row.messages.len() - sent_so_far;
                    remaining[index] = remaining[index].saturating_sub(unsent - 1);
                    settle(index, Ok(()), &mut remaining, &mut errors, &mut outcomes);
                    break;
                }
            }
        }
    }
    // Written in the order they were queued.
    while let Some((i, exchange, key, write)) = writes.pop_front() {
        confirms.push(confirmed(i, exchange, key, write.await));
    }
    while let Some((done, outcome)) = confirms.next().await {
        settle(done, outcome, &mut remaining, &mut errors, &mut outcomes);
    }
    (outcomes.published, outcomes.failed, outcomes.broker_error)
}

/// Publishes queued on the channel whose frames may not be written yet, at most: past this the
/// relay waits for the oldest to be written before it queues another.
const QUEUED_WRITES: usize = 1000;

/// The outcome of a written publish (its row's `index` with it), once the broker confirmed it.
async fn confirmed(
    index: usize,
    exchange: &str,
    routing_key: std::borrow::Cow<'_, str>,
    written: lapin::Result<lapin::PublisherConfirm>,
) -> (usize, Result<(), BusError>) {
    let outcome = match written {
        Ok(confirm) => match confirm.await {
            Ok(confirmation) => check_confirmation(confirmation, exchange, &routing_key),
            Err(error) => Err(BusError::from(error)),
        },
        Err(error) => Err(BusError::from(error)),
    };
    (index, outcome)
}

fn headers(message: &OutboxMessage) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in message.headers.0.iter() {
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        table.insert(
            key.as_str().into(),
            AMQPValue::LongString(LongString::from(text)),
        );
    }
    table
}

fn ids(batch: &[OutboxMessage]) -> Vec<i64> {
    batch.iter().map(|m| m.id).collect()
}
