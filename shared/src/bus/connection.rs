//! A supervised RabbitMQ connection.
//!
//! One task owns the connection: it connects (with exponential backoff), declares the topology,
//! hands the connection out, and when the connection fails it drops it and starts again. Users ask
//! for the current connection and, when an operation fails, ask again: they see a new connection
//! once the supervisor has rebuilt one. We do not enable lapin's own recovery: one recovery path,
//! the same after a network cut as after a broker restart, is easier to reason about and to test.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use lapin::{Connection, ConnectionProperties, Event};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::Topology;

/// How long one connection attempt may take before it is abandoned.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the supervisor checks a connection it got no error event from.
const HEALTH_CHECK: Duration = Duration::from_secs(1);

/// A handle on the supervised connection; cheap to clone.
#[derive(Clone, Debug)]
pub struct Broker {
    current: watch::Receiver<Option<Arc<Connection>>>,
    refused: watch::Receiver<Option<Arc<str>>>,
    topology: Topology,
    generation: Arc<AtomicU64>,
}

/// Checks that every node of a broker URL setting is an `amqp://` or `amqps://` URL, so a wrong
/// setting stops start-up instead of being retried for ever.
pub fn check_broker_urls(setting: &str) -> Result<(), String> {
    for url in broker_urls(setting) {
        let scheme = url.split_once("://").map(|(scheme, _)| scheme);
        if !matches!(scheme, Some("amqp" | "amqps")) {
            return Err(format!(
                "{:?} is not a RabbitMQ URL: expected amqp://user:password@host:5672/vhost (or \
                 amqps://)",
                crate::config::redact_url(url)
            ));
        }
        url.parse::<lapin::uri::AMQPUri>()
            .map_err(|e| format!("{:?}: {e}", crate::config::redact_url(url)))?;
    }
    Ok(())
}

impl Broker {
    /// Starts the supervisor for `url`; it runs until `shutdown`, then closes the connection.
    pub fn start(
        url: String,
        topology: Topology,
        connection_name: String,
        shutdown: CancellationToken,
    ) -> Self {
        let (tx, rx) = watch::channel(None);
        let (refused_tx, refused) = watch::channel(None);
        let generation = Arc::new(AtomicU64::new(0));
        // Processes given the same list of nodes start at a random one, so their connections
        // spread over a cluster instead of all landing on its first node.
        let first_node = random_index(broker_urls(&url).len());
        let supervisor = Supervisor {
            url,
            next_node: std::sync::atomic::AtomicUsize::new(first_node),
            topology: topology.clone(),
            connection_name,
            current: tx,
            refused: refused_tx,
            generation: generation.clone(),
        };
        tokio::spawn(
            supervisor
                .run(shutdown)
                .instrument(info_span!("broker_supervisor")),
        );
        Self {
            current: rx,
            refused,
            topology,
            generation,
        }
    }

    /// Resolves, with the broker's reason, if the broker refused this process's credentials or
    /// virtual host before it ever connected: a wrong setting, which trying again cannot mend,
    /// so the supervisor has stopped and the process should end. A broker that is down or
    /// unreachable is waited for instead, as is a refusal after a first connection.
    pub async fn refused(&self) -> Arc<str> {
        let mut refused = self.refused.clone();
        loop {
            if let Some(reason) = refused.borrow_and_update().clone() {
                return reason;
            }
            if refused.changed().await.is_err() {
                // The supervisor ended without a refusal (shut down): never resolves.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The names this broker's topology uses.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The connection up now, if one is (without waiting for one).
    pub fn current(&self) -> Option<Arc<Connection>> {
        self.current
            .borrow()
            .as_ref()
            .filter(|c| c.status().connected())
            .cloned()
    }

    /// Whether a connection is up and the topology declared.
    pub fn is_ready(&self) -> bool {
        self.current
            .borrow()
            .as_ref()
            .is_some_and(|c| c.status().connected())
    }

    /// How many connections the supervisor has made so far: it changes when a connection was
    /// rebuilt, so a user can tell that the channels it holds are stale.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// How many messages wait in `queue` (ready, not those delivered and unacked), read with a
    /// passive declare on a channel of its own; `Ok(None)` when the queue does not exist.
    /// Errors: no connection within a second, or the broker did not answer in five.
    pub async fn queue_depth(&self, queue: &str) -> Result<Option<u32>, super::BusError> {
        Ok(self.queue_stats(queue).await?.map(|(messages, _)| messages))
    }

    /// `(messages ready, consumers)` of `queue`, as [`Broker::queue_depth`] reads them.
    pub async fn queue_stats(&self, queue: &str) -> Result<Option<(u32, u32)>, super::BusError> {
        let never = CancellationToken::new();
        let conn = tokio::time::timeout(Duration::from_secs(1), self.connection(&never))
            .await
            .ok()
            .flatten()
            .ok_or(super::BusError::Unavailable)?;
        let depth = async {
            let channel = conn.create_channel().await?;
            let declared = channel
                .queue_declare(
                    queue.into(),
                    lapin::options::QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    lapin::types::FieldTable::default(),
                )
                .await;
            // A failed passive declare closes the channel itself.
            if declared.is_ok() {
                let _ = channel.close(200, "done".into()).await;
            }
            match declared {
                Ok(q) => Ok(Some((q.message_count(), q.consumer_count()))),
                Err(error) if matches!(error.kind(), lapin::ErrorKind::ProtocolError(_)) => {
                    Ok(None)
                }
                Err(error) => Err(super::BusError::Amqp(error)),
            }
        };
        tokio::time::timeout(Duration::from_secs(5), depth)
            .await
            .map_err(|_| super::BusError::Unavailable)?
    }

    /// A worker group's two task queues together, as [`Broker::queue_stats`] reads each;
    /// `Ok(None)` when neither exists.
    pub async fn group_stats(&self, group: &str) -> Result<Option<GroupQueues>, super::BusError> {
        let mut total: Option<GroupQueues> = None;
        for queue in self.topology.task_queues(group) {
            if let Some((messages, consumers)) = self.queue_stats(&queue).await? {
                let unconsumed = if consumers == 0 { messages } else { 0 };
                total = Some(match total {
                    None => GroupQueues {
                        messages,
                        consumers,
                        unconsumed,
                    },
                    Some(t) => GroupQueues {
                        messages: t.messages.saturating_add(messages),
                        consumers: t.consumers.min(consumers),
                        unconsumed: t.unconsumed.saturating_add(unconsumed),
                    },
                });
            }
        }
        Ok(total)
    }

    /// Waits for a connected, declared connection; None once `shutdown` is cancelled.
    pub async fn connection(&self, shutdown: &CancellationToken) -> Option<Arc<Connection>> {
        let mut current = self.current.clone();
        loop {
            if let Some(conn) = current.borrow_and_update().as_ref()
                && conn.status().connected()
            {
                return Some(conn.clone());
            }
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                changed = current.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                // a connection that died between checks shows up here within a second
                _ = tokio::time::sleep(HEALTH_CHECK) => {}
            }
        }
    }
}

/// The nodes of a broker URL setting: one URL, or several separated by commas (the nodes of a
/// cluster, tried in turn).
pub fn broker_urls(setting: &str) -> Vec<&str> {
    let urls: Vec<&str> = setting
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() { vec![setting] } else { urls }
}

/// The `host:port` of a broker URL, without credentials, vhost or query: how metrics and logs
/// name a node.
pub fn node_address(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("amqp", url));
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let has_port = host
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.contains(']'));
    if has_port {
        host.to_string()
    } else if scheme.eq_ignore_ascii_case("amqps") {
        format!("{host}:5671")
    } else {
        format!("{host}:5672")
    }
}

/// A random index below `len` (0 when `len` is 0), from the process's randomly seeded hasher.
fn random_index(len: usize) -> usize {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    if len == 0 {
        0
    } else {
        (random % len as u64) as usize
    }
}

struct Supervisor {
    url: String,
    next_node: std::sync::atomic::AtomicUsize,
    topology: Topology,
    connection_name: String,
    current: watch::Sender<Option<Arc<Connection>>>,
    refused: watch::Sender<Option<Arc<str>>>,
    generation: Arc<AtomicU64>,
}

/// Why connecting failed, and whether trying again can help.
struct ConnectFailure {
    message: String,
    /// The broker answered and refused the credentials or the virtual host.
    refused: bool,
}

impl ConnectFailure {
    fn retry(message: String) -> Self {
        Self {
            message,
            refused: false,
        }
    }
}

/// Whether a connection error is the broker refusing who we are: ACCESS_REFUSED (bad user or
/// password) or NOT_ALLOWED (no access to the virtual host).
fn is_refusal(error: &lapin::Error) -> bool {
    matches!(error.kind(), lapin::ErrorKind::ProtocolError(e) if matches!(e.get_id(), 403 | 530))
}

impl Supervisor {
    async fn run(self, shutdown: CancellationToken) {
        let mut backoff = self.backoff();
        // A refusal ends the process only before it ever connected (a wrong setting); later, it
        // is a password being rotated or a connection limit, and is waited out like an outage.
        let mut connected_once = false;
        while !shutdown.is_cancelled() {
            match self.connect().await {
                Ok((conn, node)) => {
                    connected_once = true;
                    let conn = Arc::new(conn);
                    backoff = self.backoff();
                    self.generation.fetch_add(1, Ordering::AcqRel);
                    metrics::counter!("chime_broker_connections_total", "node" => node.clone())
                        .increment(1);
                    metrics::gauge!("chime_broker_connected", "node" => node.clone()).set(1.0);
                    info!(%node, "connected to RabbitMQ, topology declared");
                    let events = conn.events_listener();
                    self.current.send_replace(Some(conn.clone()));
                    tokio::select! {
                        _ = shutdown.cancelled() => {
                            self.current.send_replace(None);
                            metrics::gauge!("chime_broker_connected", "node" => node).set(0.0);
                            let _ = conn.close(200, "shutting down".into()).await;
                            return;
                        }
                        reason = watch_until_broken(&conn, events) => {
                            metrics::gauge!("chime_broker_connected", "node" => node.clone())
                                .set(0.0);
                            metrics::counter!("chime_broker_connections_lost_total", "node" => node.clone())
                                .increment(1);
                            warn!(%reason, %node, "RabbitMQ connection lost; reconnecting");
                            self.current.send_replace(None);
                            let _ = conn.close(320, "reconnecting".into()).await;
                        }
                    }
                }
                Err(failure) if failure.refused && !connected_once => {
                    tracing::error!(error = %failure.message, "RabbitMQ refused this process's credentials; giving up");
                    self.refused
                        .send_replace(Some(failure.message.as_str().into()));
                    return;
                }
                Err(failure) => {
                    let error = failure.message;
                    let delay = backoff.next().unwrap_or(Duration::from_secs(5));
                    warn!(%error, ?delay, "cannot reach RabbitMQ; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    fn backoff(&self) -> impl Iterator<Item = Duration> {
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(5))
            .with_jitter()
            .without_max_times()
            .build()
    }

    /// Connects to the first node that answers, starting at a random node other than the one
    /// used last (so a node that went away is not the first one tried again), and declares the
    /// topology. Returns the connection and the node's `host:port`.
    async fn connect(&self) -> Result<(Connection, String), ConnectFailure> {
        let urls = broker_urls(&self.url);
        let first = self.next_node.load(Ordering::Relaxed);
        let mut errors = Vec::new();
        let mut refused = false;
        for offset in 0..urls.len() {
            let index = (first + offset) % urls.len();
            match self.connect_to(urls[index]).await {
                Ok(conn) => {
                    // When this node goes, the next attempt starts at a random other node: the
                    // processes that were on it spread over the rest instead of all moving to
                    // the same one.
                    let other = 1 + random_index(urls.len().saturating_sub(1));
                    self.next_node
                        .store((index + other) % urls.len(), Ordering::Relaxed);
                    return Ok((conn, node_address(urls[index])));
                }
                Err(error) if urls.len() > 1 => {
                    // A node that refuses refuses for the whole cluster: users are cluster-wide.
                    refused |= error.refused;
                    errors.push(format!("node {}: {}", index + 1, error.message));
                }
                Err(error) => return Err(error),
            }
        }
        self.next_node
            .store((first + 1) % urls.len(), Ordering::Relaxed);
        Err(ConnectFailure {
            message: errors.join("; "),
            refused,
        })
    }

    async fn connect_to(&self, url: &str) -> Result<Connection, ConnectFailure> {
        let properties = ConnectionProperties::default()
            .with_connection_name(self.connection_name.clone().into());
        let node = node_address(url);
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect(url, properties))
            .await
            .map_err(|_| {
                ConnectFailure::retry(format!("connecting timed out after {CONNECT_TIMEOUT:?}"))
            })?
            .map_err(|e| ConnectFailure {
                refused: is_refusal(&e),
                message: if is_refusal(&e) {
                    format!(
                        "RabbitMQ at {node} refused the user or virtual host of CHIME_AMQP_URL \
                         ({e}): check \
                         the user, its password and its permissions on the virtual host"
                    )
                } else {
                    format!("connecting: {e}")
                },
            })?;
        let channel = conn
            .create_channel()
            .await
            .map_err(|e| ConnectFailure::retry(format!("opening a channel: {e}")))?;
        self.topology
            .declare(&channel)
            .await
            .map_err(|e| ConnectFailure {
                refused: is_refusal(&e),
                message: format!(
                    "declaring the topology on {node} (the user needs configure, write and read \
                     permissions on names starting with the prefix): {e}"
                ),
            })?;
        let _ = channel.close(200, "declared".into()).await;
        Ok(conn)
    }
}

/// Resolves when the connection reports an error or stops being connected.
/// Whether `error` is a channel-level (soft) AMQP error, which leaves the connection open.
fn is_soft(error: &lapin::Error) -> bool {
    matches!(
        error.kind(),
        lapin::ErrorKind::ProtocolError(e) if matches!(e.kind(), lapin::protocol::AMQPErrorKind::Soft(_))
    )
}

async fn watch_until_broken(
    conn: &Connection,
    events: impl futures::Stream<Item = Event> + Send + 'static,
) -> String {
    let mut events = std::pin::pin!(events);
    let mut tick = tokio::time::interval(HEALTH_CHECK);
    loop {
        tokio::select! {
            event = events.next() => match event {
                // A soft error closes one channel (a passive declare of a queue not made yet,
                // say); the connection and every other channel carry on.
                Some(Event::Error(error)) if is_soft(&error) => {
                    tracing::debug!(%error, "a channel was closed; the connection stays");
                }
                Some(Event::Error(error)) => return error.to_string(),
                Some(_) => {}
                None => return "connection dropped".into(),
            },
            _ = tick.tick() => {
                if !conn.status().connected() {
                    return "connection closed".into();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_named_by_host_and_port_without_credentials() {
        assert_eq!(
            node_address("amqp://chime:secret@rabbitmq2:5672/%2f"),
            "rabbitmq2:5672"
        );
        assert_eq!(
            node_address("amqp://guest:guest@localhost"),
            "localhost:5672"
        );
        assert_eq!(
            node_address("amqps://u:p@broker.example/vh"),
            "broker.example:5671"
        );
        assert_eq!(
            node_address("amqp://[::1]:5673/%2f?heartbeat=10"),
            "[::1]:5673"
        );
        assert_eq!(node_address("amqp://[::1]/%2f"), "[::1]:5672");
    }

    #[test]
    fn a_random_index_stays_in_range() {
        assert_eq!(random_index(0), 0);
        assert!((0..100).all(|_| random_index(3) < 3));
    }
}

/// What the broker says about a worker group's two task queues (process and inline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupQueues {
    /// Messages ready in both.
    pub messages: u32,
    /// Consumers of the one with fewer (a worker consumes both, so a queue nobody consumes, as
    /// the inline one while only workers of an earlier version run, shows as none).
    pub consumers: u32,
    /// Messages ready in a queue that has no consumer.
    pub unconsumed: u32,
}
