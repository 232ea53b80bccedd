//! What every chime service process shares: the settings, the store, the supervised broker
//! connection and the outbox relay. `chime up` starts one node and runs every service on it.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bus::{Broker, OutboxRelay, Topology};
use crate::config::Settings;
use crate::store::{Store, StoreError};

/// How long each step of [`Node::stopped`] may take.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A setting no retry can mend (a URL of the wrong kind).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The store could not be reached or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The shared parts of one chime process.
#[derive(Debug)]
pub struct Node {
    /// The process's settings.
    pub settings: Settings,
    /// The job store (migrated).
    pub store: Store,
    /// The supervised broker connection.
    pub broker: Broker,
    relay: JoinHandle<()>,
    /// Stops the relay and the broker connection, after the services that use them.
    stop: CancellationToken,
}

impl Node {
    /// Connects to PostgreSQL (creating and migrating the database), starts the broker supervisor
    /// and the outbox relay. The broker may still be unreachable when this returns: everything
    /// that needs it waits for it, and the outbox holds what must be published.
    ///
    /// The connection and the relay outlive the services' shutdown (running attempts still ack
    /// and publish while they drain): they stop in [`Node::stopped`].
    pub async fn start(settings: Settings, role: &str) -> Result<Self, NodeError> {
        crate::config::check_service_urls(&settings)?;
        let stop = CancellationToken::new();
        // A process that serves the API waits long for a connection (its bursts queue); one of
        // background services waits little, so that it is back at once after an outage.
        let acquire_timeout = match role {
            "scheduler" | "worker" | "dependency" => std::time::Duration::from_secs(5),
            _ => std::time::Duration::from_secs(30),
        };
        let store = Store::connect_with(
            &settings.database_url,
            settings.pool_size(role),
            acquire_timeout,
            true,
        )
        .await?;
        let topology = Topology::new(settings.prefix.clone());
        let name = format!("chime {role} on {}", hostname());
        let broker = Broker::start(
            settings.amqp_url.clone(),
            topology,
            name,
            stop.child_token(),
        );
        // A worker's, a dependency service's or an API's relay publishes what its own process
        // wrote (woken in-process) and polls for the rest; the schedulers' relays LISTEN for
        // every process's rows, so thirty workers do not hold thirty listening connections.
        let listens = !matches!(role, "worker" | "dependency" | "api");
        let relay = tokio::spawn(
            OutboxRelay::new(store.clone(), broker.clone(), listens).run(stop.child_token()),
        );
        Ok(Self {
            settings,
            store,
            broker,
            relay,
            stop,
        })
    }

    /// The AMQP names of this installation.
    pub fn topology(&self) -> &Topology {
        self.broker.topology()
    }

    /// Stops the relay and the broker connection, and closes the pool. Call it once the services
    /// running on the node have stopped.
    ///
    /// Each step waits at most [`STOP_WAIT`]: a relay round on a database that does not answer,
    /// or a connection still held by a task that outlived its service (`close` waits for every
    /// connection to come back), must not keep the process from ending. What the relay leaves
    /// in the outbox, another relay publishes.
    pub async fn stopped(self) {
        self.stop.cancel();
        let mut relay = self.relay;
        if tokio::time::timeout(STOP_WAIT, &mut relay).await.is_err() {
            tracing::warn!(
                "the outbox relay did not stop in time; leaving its rows to another relay"
            );
            relay.abort();
        }
        if tokio::time::timeout(STOP_WAIT, self.store.close())
            .await
            .is_err()
        {
            tracing::warn!(
                "database connections still in use at shutdown; stopping without waiting for them"
            );
        }
    }
}

/// This machine's host name (for worker and connection names).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}
