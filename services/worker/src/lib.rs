//! chime-worker: consumes worker-group queues and executes tasks.
//!
//! - [`consumer`]: where messages are consumed (one consumer per queue, rebuilt on reconnect);
//! - [`delivery`]: what happens to one delivery, from decode to ack;
//! - [`executor`]: the kinds a worker runs (shell, http, noop, command templates);
//! - [`control`]: kill commands addressed to this worker;
//! - [`transitions`]: where its task transitions are committed, batched;
//! - this file: the worker's lifetime — register, heartbeat, consume, drain, go offline.
//!
//! A worker also consumes `<prefix>.submit`, turning ad-hoc submissions from any AMQP client into
//! task rows, and its own `<prefix>.worker.<id>` queue of commands.

pub mod consumer;
pub mod control;
pub mod delivery;
pub mod executor;
pub mod transitions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chime_core::Node;
use chime_core::bus::{Broker, Topology};
use chime_core::config::WorkerSettings;
use chime_core::node::hostname;
use chime_core::store::task_lifecycle::WorkerIdentity;
use chime_core::store::{Store, StoreError, workers};
use lapin::Channel;
use lapin::message::Delivery;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info, info_span, warn};
use uuid::Uuid;

use crate::consumer::QueueKind;
use crate::executor::Executors;

/// A worker that could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Its registration failed.
    #[error("registering the worker: {0}")]
    Register(#[source] StoreError),
    /// Its HTTP client could not be built.
    #[error("building the http executor's client: {0}")]
    HttpClient(#[source] reqwest::Error),
}

/// An attempt this worker runs, and how to kill it.
#[derive(Debug)]
struct RunningAttempt {
    attempt: i32,
    kill: CancellationToken,
}

/// One running worker: what every consumer and attempt of it shares.
#[derive(Debug)]
pub struct Worker {
    /// Its identity, recorded on every attempt it runs.
    pub identity: WorkerIdentity,
    store: Store,
    broker: Broker,
    prefetch: u16,
    executors: Executors,
    transitions: transitions::Transitions,
    permits: Arc<Semaphore>,
    attempts: TaskTracker,
    /// The attempts running now, by task: where a kill command finds its process. Held only for
    /// map updates, never across an await.
    running: Mutex<HashMap<Uuid, RunningAttempt>>,
    /// Cancelled when the worker stops taking work.
    draining: CancellationToken,
    /// Cancelled when the grace period is over: running attempts are interrupted.
    stop_attempts: CancellationToken,
    /// Cancelled when the worker gives up on writes it could not make.
    hard_stop: CancellationToken,
}

impl Worker {
    fn topology(&self) -> &Topology {
        self.broker.topology()
    }

    /// A slot to run an attempt in; None once the worker is draining.
    async fn permit(&self) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            biased;
            _ = self.draining.cancelled() => None,
            permit = self.permits.clone().acquire_owned() => permit.ok(),
        }
    }

    /// Records a started attempt; returns the token that kills it.
    fn track(&self, task_id: Uuid, attempt: i32) -> CancellationToken {
        let kill = CancellationToken::new();
        if let Ok(mut running) = self.running.lock() {
            running.insert(
                task_id,
                RunningAttempt {
                    attempt,
                    kill: kill.clone(),
                },
            );
        }
        kill
    }

    /// Forgets an attempt that ended.
    fn untrack(&self, task_id: Uuid) {
        if let Ok(mut running) = self.running.lock() {
            running.remove(&task_id);
        }
    }

    /// Kills `attempt` of a task if this worker runs it; returns whether it did.
    fn kill(&self, task_id: Uuid, attempt: i32) -> bool {
        let Ok(running) = self.running.lock() else {
            return false;
        };
        match running.get(&task_id) {
            Some(run) if run.attempt == attempt => {
                run.kill.cancel();
                true
            }
            _ => false,
        }
    }

    fn spawn_delivery(
        self: &Arc<Self>,
        channel: Channel,
        queue: String,
        kind: QueueKind,
        delivery: Delivery,
    ) {
        let worker = self.clone();
        self.attempts.spawn(async move {
            match kind {
                QueueKind::Group => delivery::handle_task(&worker, channel, &queue, delivery).await,
                QueueKind::Submit => {
                    delivery::handle_submission(&worker, channel, &queue, delivery).await
                }
                QueueKind::Control => control::handle(&worker, delivery).await,
            }
        });
    }
}

/// Runs a worker on `node` until `shutdown`, then drains: stops consuming, returns unstarted
/// deliveries, waits up to the grace period for running attempts, and goes offline.
pub async fn run(
    node: &Node,
    settings: WorkerSettings,
    shutdown: CancellationToken,
) -> Result<(), WorkerError> {
    let host = hostname();
    let id = Uuid::now_v7();
    let short = id.simple().to_string();
    let identity = WorkerIdentity {
        id,
        name: format!(
            "{host}-{}-{}",
            std::process::id(),
            &short[short.len() - 4..]
        ),
    };
    let executors = Executors::new(settings.output_tail_bytes, node.settings.executors.clone())
        .map_err(WorkerError::HttpClient)?;
    let kinds = executors.kinds();
    workers::register(
        &node.store,
        workers::NewWorker {
            identity: &identity,
            host: &host,
            pid: std::process::id(),
            groups: &settings.groups,
            kinds: &kinds,
            concurrency: settings.concurrency,
        },
    )
    .await
    .map_err(WorkerError::Register)?;
    let transitions = transitions::Transitions::start(
        node.store.clone(),
        node.broker.topology().clone(),
        identity.clone(),
    );
    let worker = Arc::new(Worker {
        identity,
        store: node.store.clone(),
        broker: node.broker.clone(),
        prefetch: settings.prefetch(),
        executors,
        transitions,
        permits: Arc::new(Semaphore::new(usize::from(settings.concurrency))),
        attempts: TaskTracker::new(),
        running: Mutex::new(HashMap::new()),
        draining: CancellationToken::new(),
        stop_attempts: CancellationToken::new(),
        hard_stop: CancellationToken::new(),
    });
    let span = info_span!("worker", name = %worker.identity.name);
    async {
        info!(groups = ?settings.groups, concurrency = settings.concurrency, "worker online");
        // Heartbeats go on while draining: a long task must not make its worker look dead.
        let stop_heartbeat = CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat_loop(worker.clone(), stop_heartbeat.clone()));
        let consumers = TaskTracker::new();
        let topology = worker.topology().clone();
        for group in &settings.groups {
            consumers.spawn(consumer::consume(
                worker.clone(),
                topology.group_queue(group),
                QueueKind::Group,
                worker.draining.clone(),
            ));
        }
        consumers.spawn(consumer::consume(
            worker.clone(),
            topology.submit_exchange(),
            QueueKind::Submit,
            worker.draining.clone(),
        ));
        consumers.close();
        // Kill commands must reach running attempts while the worker drains: this consumer stops
        // with the heartbeat, after the last attempt.
        let stop_control = CancellationToken::new();
        let control = tokio::spawn(consumer::consume(
            worker.clone(),
            topology.worker_queue(&worker.identity.id.to_string()),
            QueueKind::Control,
            stop_control.clone(),
        ));

        shutdown.cancelled().await;
        info!("draining");
        if let Err(error) = workers::set_status(&worker.store, worker.identity.id, "draining").await
        {
            warn!(%error, "cannot mark the worker draining");
        }
        worker.draining.cancel();
        consumers.wait().await;
        worker.attempts.close();
        let grace = Duration::from_millis(settings.shutdown_grace_ms);
        if tokio::time::timeout(grace, worker.attempts.wait())
            .await
            .is_err()
        {
            warn!(
                ?grace,
                "running tasks outlived the grace period; interrupting them"
            );
            worker.stop_attempts.cancel();
            if tokio::time::timeout(Duration::from_secs(5), worker.attempts.wait())
                .await
                .is_err()
            {
                worker.hard_stop.cancel();
                // Past this, what is left waits on a broker or database that does not answer:
                // its deliveries come back and recovery decides.
                if tokio::time::timeout(Duration::from_secs(10), worker.attempts.wait())
                    .await
                    .is_err()
                {
                    warn!("attempts still unrecorded at shutdown; leaving them to recovery");
                }
            }
        }
        stop_heartbeat.cancel();
        stop_control.cancel();
        let _ = heartbeat.await;
        let _ = control.await;
        if let Err(error) = workers::set_status(&worker.store, worker.identity.id, "offline").await
        {
            warn!(%error, "cannot mark the worker offline");
        }
        info!("worker offline");
    }
    .instrument(span)
    .await;
    Ok(())
}

async fn heartbeat_loop(worker: Arc<Worker>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(workers::HEARTBEAT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    async {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match workers::heartbeat(&worker.store, worker.identity.id).await {
                Ok(kills) => {
                    metrics::counter!("chime_worker_heartbeats_total").increment(1);
                    for (task_id, attempt) in kills {
                        if worker.kill(task_id, attempt) {
                            info!(%task_id, attempt, "killing a task whose kill command was missed");
                        }
                    }
                }
                Err(error) => warn!(%error, "heartbeat failed"),
            }
        }
    }
    .instrument(info_span!("heartbeat"))
    .await
}
