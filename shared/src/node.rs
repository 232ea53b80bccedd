//! What every chime service process shares: the settings, the store, the supervised broker
//! connection, the outbox relay and, when a worker runs in the process, a way to hand it tasks.
//! `chime up` starts one node and runs every service on it.

use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::bus::{Broker, OutboxRelay, Topology};
use crate::config::Settings;
use crate::model::NewTask;
use crate::model::message::TaskMessage;
use crate::store::task_lifecycle::WorkerIdentity;
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
    /// The worker running in this process, if one does and takes submissions.
    pub local_worker: Arc<LocalWorkerSlot>,
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
        // Says in the logs and metrics when PostgreSQL goes away and comes back, and on which
        // server (a failover moves it).
        tokio::spawn(crate::store::availability::watch(
            store.clone(),
            stop.child_token(),
        ));
        Ok(Self {
            settings,
            store,
            broker,
            local_worker: Arc::default(),
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

/// A worker in this process that runs some of the submissions another service of the process
/// records (the API's `POST /api/v1/tasks`), as it runs those it records from the submit queue:
/// the submission's commit writes the task `ready` under the worker, with no task message, and
/// the worker starts it once the commit is in. A task it never starts, because the process died
/// or lost the commit's answer, is published by a scheduler
/// ([`crate::store::task_lifecycle::publish_unstarted_taken`]).
pub trait LocalWorker: Send + Sync {
    /// Who takes the tasks (their `tasks.worker_id`).
    fn identity(&self) -> &WorkerIdentity;

    /// A slot to run `task`, routed to `group`, in this worker; None if it is not to take it
    /// (not its group or kind, a kind that runs in a process of its own, no slot free, draining).
    fn slot_to_take(&self, task: &NewTask, group: &str) -> Option<LocalSlot>;

    /// Runs a task that a committed submission made under this worker, in `slot`.
    fn run_taken(&self, message: TaskMessage, slot: LocalSlot);
}

/// A slot of a [`LocalWorker`], held from before the submission's commit until its task runs
/// there or the slot is dropped (the task was not made, or the commit failed). While one is held
/// the worker's drain waits, so a commit in flight never hands a task to a worker that stopped.
#[derive(Debug)]
pub struct LocalSlot {
    permit: OwnedSemaphorePermit,
    drain_waits: TaskTrackerToken,
}

impl LocalSlot {
    /// `permit` of a worker whose attempts `drain_waits` tracks.
    pub fn new(permit: OwnedSemaphorePermit, drain_waits: TaskTrackerToken) -> Self {
        Self {
            permit,
            drain_waits,
        }
    }

    /// The slot's permit, and its hold on the worker's drain: let that go once the task is
    /// tracked by the worker on its own.
    pub fn into_parts(self) -> (OwnedSemaphorePermit, TaskTrackerToken) {
        (self.permit, self.drain_waits)
    }
}

/// Where a process's worker offers to take submissions, for as long as it runs.
#[derive(Default)]
pub struct LocalWorkerSlot(RwLock<Option<Arc<dyn LocalWorker>>>);

impl LocalWorkerSlot {
    /// Offers `worker` to the process's other services (None: withdraws the offer).
    pub fn set(&self, worker: Option<Arc<dyn LocalWorker>>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = worker;
    }

    /// The worker on offer, if any.
    pub fn get(&self) -> Option<Arc<dyn LocalWorker>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl std::fmt::Debug for LocalWorkerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let worker = self.get();
        f.debug_tuple("LocalWorkerSlot")
            .field(&worker.as_ref().map(|w| &w.identity().name))
            .finish()
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
