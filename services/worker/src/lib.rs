//! chime-worker: consumes worker-group queues and executes tasks.
//!
//! - [`consumer`]: where messages are consumed (one consumer per queue, rebuilt on reconnect);
//! - [`delivery`]: what happens to one delivery, from decode to ack;
//! - [`executor`]: the kinds a worker runs (shell, http, noop, command templates);
//! - [`control`]: kill and drain commands addressed to this worker;
//! - [`transitions`]: where its task transitions are committed, batched;
//! - [`lease`]: the worker's lease, counted on its own clock, and when it stops its attempts;
//! - this file: the worker's lifetime — register, renew its lease over its liveness session,
//!   consume, drain, go offline — and the attempts it holds.
//!
//! The worker keeps one entry per attempt it holds, from before it asks to start it until its
//! end is committed. That is what it tells the database with each heartbeat: an attempt running
//! under it that it does not hold never started here and is released; an attempt it runs that is
//! no longer its own was taken by recovery and is killed at once (self-fencing).
//!
//! A worker also consumes `<prefix>.submit`, turning ad-hoc submissions from any AMQP client into
//! task rows (and running the noop and http ones it has a slot free for itself, with no task
//! message: [`submissions`]), and its own `<prefix>.worker.<id>` queue of commands. Beside the
//! API in one process (`chime up`), it takes single `POST /api/v1/tasks` submissions the same
//! way: it offers itself on the node (`chime_core::node::LocalWorker`) while it consumes.

pub mod consumer;
pub mod control;
pub mod delivery;
pub mod executor;
pub mod lease;
pub mod open_store;
mod refusal_grace;
pub mod submissions;
pub mod submitters;
pub mod transitions;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chime_core::Node;
use chime_core::bus::{Broker, Topology};
use chime_core::config::WorkerSettings;
use chime_core::model::{NewTask, TaskMessage, kinds};
use chime_core::node::{LocalSlot, LocalWorker, hostname};
use chime_core::store::task_lifecycle::{self, WorkerIdentity};
use chime_core::store::{Store, StoreError, workers};
use lapin::Channel;
use lapin::message::Delivery;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, error, info, info_span, warn};
use uuid::Uuid;

use crate::consumer::QueueKind;
use crate::executor::Executors;

/// A worker that could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Its guard died: it ended its attempts and stopped rather than run them unguarded.
    #[error(
        "the worker's guard died: its attempts were ended and the worker stopped; start it again \
         (a new guard starts with it)"
    )]
    GuardLost,
    /// Its registration failed.
    #[error("registering the worker: {0}")]
    Register(#[source] StoreError),
    /// Its `http_allow` setting has an entry that is neither a network nor a host name.
    #[error("{0}")]
    HttpAllow(String),
    /// Its HTTP client could not be built.
    #[error("building the http executor's client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// The guard that kills its tasks' processes if it dies or freezes could not start: running
    /// commands without it could run a task twice at once.
    #[error(
        "starting the worker's guard (it kills this worker's tasks if the worker is killed or frozen): {0}"
    )]
    Guard(#[source] std::io::Error),
    /// Its tasks, running as another user, could reach the store or the broker without
    /// credentials.
    #[error("{0}")]
    OpenStore(String),
}

/// Where an attempt this worker holds is in its life here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its start was asked for; the answer has not come (or the database is unreachable).
    Starting,
    /// Started: the database says it runs here.
    Running,
    /// Executed; its end is being committed.
    Ending,
    /// Found running here though this worker did not hold it, and being released as never run:
    /// a delivery of it meanwhile is dropped as a duplicate (the release publishes its next
    /// attempt), so this worker never runs what it is releasing.
    Releasing,
}

/// An attempt this worker holds, and how to stop it.
#[derive(Debug)]
struct HeldAttempt {
    phase: Phase,
    /// Cancelled by a kill request: the attempt ends `killed`.
    kill: CancellationToken,
    /// Cancelled when the worker gives the attempt up (shutdown past its grace, or self-fencing):
    /// it ends as a lost attempt, never as the job's failure.
    abandon: CancellationToken,
    /// Another delivery of the attempt was dropped while this one was starting: if this one
    /// turns out forged, that other may have been the genuine message.
    shadowed: bool,
}

/// A task's attempt: what the worker holds attempts by.
type AttemptKey = (Uuid, i32);

/// One running worker: what every consumer and attempt of it shares.
#[derive(Debug)]
pub struct Worker {
    /// Its identity, recorded on every attempt it runs.
    pub identity: WorkerIdentity,
    store: Store,
    broker: Broker,
    prefetch: u16,
    /// Submissions recorded per commit, at most, and how long one waits for the rest.
    submit_batch: (usize, std::time::Duration),
    executors: Executors,
    transitions: transitions::Transitions,
    /// Slots for tasks that run as processes (`concurrency`).
    process_slots: Arc<Semaphore>,
    /// Slots for tasks the worker runs itself (`inline_concurrency`).
    inline_slots: Arc<Semaphore>,
    /// The prefetch of its inline queues: its inline slots.
    inline_prefetch: u16,
    attempts: TaskTracker,
    /// The attempts this worker holds: where a kill command finds its process, and what its
    /// heartbeat reports. Locked only for map updates, never across an await.
    held: Mutex<HashMap<AttemptKey, HeldAttempt>>,
    /// Cancelled by a `drain` command: the worker drains as on SIGTERM.
    drain_requested: CancellationToken,
    /// Cancelled when the worker stops taking work.
    draining: CancellationToken,
    /// Cancelled when the grace period is over: running attempts are interrupted.
    stop_attempts: CancellationToken,
    /// Cancelled when the worker gives up on writes it could not make.
    hard_stop: CancellationToken,
    /// Who may submit over AMQP.
    submitters: submitters::Submitters,
    /// The lease it holds its attempts by.
    lease: Arc<lease::Lease>,
    /// Whether it runs submissions it records itself when it has a free slot
    /// (`take_submissions`), and what it could take: its groups and the kinds it runs.
    takes: Option<(HashSet<String>, HashSet<String>)>,
}

impl Worker {
    fn topology(&self) -> &Topology {
        self.broker.topology()
    }

    /// A slot to run an attempt of `kind` in (inline or process, by the kind, whichever queue
    /// it came from); None once the worker is draining.
    async fn permit(&self, kind: &str) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            biased;
            _ = self.draining.cancelled() => None,
            permit = self.slots(kind).clone().acquire_owned() => permit.ok(),
        }
    }

    /// The slots an attempt of `kind` runs in.
    fn slots(&self, kind: &str) -> &Arc<Semaphore> {
        if kinds::runs_inline(kind) {
            &self.inline_slots
        } else {
            &self.process_slots
        }
    }

    /// A slot to run `task` in, here, if this worker is to take it from the submission it records
    /// ([`submissions`]): it runs `task`'s group and kind, the kind runs inline (noop, http), the
    /// task asks for no user of its own (not every worker of a group need allow it), and the
    /// worker holds its lease, is not draining, and has an inline slot free that no delivery is
    /// waiting for. Process kinds are never taken: a delivered shell task must find its slot free
    /// (docs/src/operations/configuration.md, `CHIME_WORKER__PREFETCH`), and a taken one could
    /// hold it for as long as it runs, which the broker cannot see.
    fn slot_to_take(&self, task: &NewTask, group: &str) -> Option<OwnedSemaphorePermit> {
        let (groups, kinds) = self.takes.as_ref()?;
        if !kinds::runs_inline(&task.kind)
            || !groups.contains(group)
            || !kinds.contains(&task.kind)
            || task.execute_user.is_some()
            || self.draining.is_cancelled()
            || !self.lease.held()
        {
            return None;
        }
        self.slots(&task.kind).clone().try_acquire_owned().ok()
    }

    /// Runs a task taken from its submission, in `slot`, beside the delivered ones.
    fn run_taken(self: &Arc<Self>, message: TaskMessage, slot: OwnedSemaphorePermit) {
        metrics::counter!("chime_worker_submissions_taken_total").increment(1);
        let worker = self.clone();
        self.attempts
            .spawn(async move { delivery::run_taken(&worker, message, slot).await });
    }

    /// Takes hold of an attempt before asking to start it; None if this worker holds it already
    /// (a duplicate delivery: the first one runs it). Returns the tokens that kill it and that
    /// abandon it, and the lease's count now: a lapse from here on, even one the worker noticed
    /// while the start was being committed, loses the attempt.
    fn hold(&self, key: AttemptKey) -> Option<(CancellationToken, CancellationToken, u64)> {
        let mark = self.lease.mark();
        let mut held = self.held.lock().ok()?;
        if let Some(holder) = held.get_mut(&key) {
            holder.shadowed |= holder.phase == Phase::Starting;
            return None;
        }
        let kill = CancellationToken::new();
        let abandon = self.stop_attempts.child_token();
        held.insert(
            key,
            HeldAttempt {
                phase: Phase::Starting,
                kill: kill.clone(),
                abandon: abandon.clone(),
                shadowed: false,
            },
        );
        Some((kill, abandon, mark))
    }

    /// Of `orphans` (attempts the database shows running here that this worker did not hold),
    /// those it still does not hold, now held as [`Phase::Releasing`]: a delivery of one taken
    /// between the heartbeat's look and the release is dropped instead of run. An orphan held
    /// meanwhile is left to its holder. [`Worker::let_go`] each once its release is over.
    fn claim_orphans(&self, orphans: &[AttemptKey]) -> Vec<AttemptKey> {
        let Ok(mut held) = self.held.lock() else {
            return Vec::new();
        };
        let mut claimed = Vec::new();
        for key in orphans {
            if held.contains_key(key) {
                continue;
            }
            held.insert(
                *key,
                HeldAttempt {
                    phase: Phase::Releasing,
                    kill: CancellationToken::new(),
                    abandon: CancellationToken::new(),
                    shadowed: false,
                },
            );
            claimed.push(*key);
        }
        claimed
    }

    /// Abandons running attempts — `only` these, or all of them — (self-fencing); returns how
    /// many.
    fn abandon(&self, only: Option<&[AttemptKey]>) -> usize {
        let Ok(held) = self.held.lock() else {
            return 0;
        };
        let mut abandoned = 0;
        for (key, attempt) in held.iter() {
            if attempt.phase == Phase::Running && only.is_none_or(|keys| keys.contains(key)) {
                attempt.abandon.cancel();
                abandoned += 1;
            }
        }
        abandoned
    }

    /// Moves a held attempt to `phase`.
    fn set_phase(&self, key: AttemptKey, phase: Phase) {
        if let Ok(mut held) = self.held.lock()
            && let Some(attempt) = held.get_mut(&key)
        {
            attempt.phase = phase;
        }
    }

    /// Lets go of an attempt: it ended (its end committed), or never started here.
    /// Stops holding the attempt; returns whether a delivery of it was dropped while it was
    /// starting.
    fn let_go(&self, key: AttemptKey) -> bool {
        self.held
            .lock()
            .ok()
            .and_then(|mut held| held.remove(&key))
            .is_some_and(|holder| holder.shadowed)
    }

    /// Kills `attempt` of a task if this worker runs it; returns whether it did.
    fn kill(&self, task_id: Uuid, attempt: i32) -> bool {
        let Ok(held) = self.held.lock() else {
            return false;
        };
        match held.get(&(task_id, attempt)) {
            Some(run) if run.phase == Phase::Running => {
                run.kill.cancel();
                true
            }
            _ => false,
        }
    }

    /// The attempts the database should show running here (`Running`), and every attempt held
    /// (also those starting or ending), for the heartbeat.
    fn held_attempts(&self) -> (Vec<AttemptKey>, Vec<AttemptKey>) {
        let Ok(held) = self.held.lock() else {
            return (Vec::new(), Vec::new());
        };
        let running = held
            .iter()
            .filter(|(_, a)| a.phase == Phase::Running)
            .map(|(k, _)| *k)
            .collect();
        (running, held.keys().copied().collect())
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
                QueueKind::Group | QueueKind::Inline => {
                    delivery::handle_task(&worker, channel, &queue, delivery).await
                }
                // The consumer records submissions in batches itself; one that arrives here
                // goes as a batch of one.
                QueueKind::Submit => {
                    // Beside the consumer's own batches: acked one by one.
                    let mut settled = submissions::Settled(false);
                    submissions::handle_batch(
                        &worker,
                        channel,
                        &queue,
                        vec![delivery],
                        &mut settled,
                    )
                    .await
                }
                QueueKind::Control => control::handle(&worker, delivery).await,
            }
        });
    }
}

/// A worker refuses to run tasks that could reach the store or the broker without credentials
/// ([`open_store`]), unless told the machine is a throwaway: a root worker's tasks run as other
/// users (its default and execute users), any other worker's as its own user, who is then the
/// one the probes try.
async fn refuse_an_open_store(node: &Node, settings: &WorkerSettings) -> Result<(), WorkerError> {
    if settings.allow_open_store {
        warn!(
            "worker.allow_open_store is set: tasks run as other users without a check that they cannot reach the store or the broker"
        );
        return Ok(());
    }
    let task_users: Vec<String> = if nix::unistd::geteuid().is_root() {
        std::iter::once(settings.default_user.clone())
            .chain(settings.execute_users.iter().cloned())
            .collect()
    } else {
        vec![own_user()]
    };
    let probes = open_store::Probes {
        database_url: node.settings.database_url.clone(),
        amqp_url: node.settings.amqp_url.clone(),
        task_users: task_users.clone(),
    };
    let holes = open_store::find_holes(&probes).await;
    if holes.is_empty() {
        return Ok(());
    }
    Err(WorkerError::OpenStore(open_store::refusal(
        &holes,
        &task_users[0],
    )))
}

/// The name of the user this process runs as (its uid when it has no name).
fn own_user() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
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
    // Tasks that run as the worker's own user must not read its environment (the database URL,
    // tokens) from /proc/<worker>/environ, nor ptrace it: a process that is not dumpable allows
    // neither to anyone but root. (A child's exec makes the child dumpable again.)
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        warn!(%error, "cannot make the worker undumpable: its tasks may read its environment");
    }
    refuse_an_open_store(node, &settings).await?;
    let executors = Executors::new(&settings, node.settings.executors.clone())?;
    let kinds = executors.kinds();
    chime_core::telemetry::catalog::register_at_zero(
        chime_core::telemetry::catalog::Role::Worker,
        &settings.groups,
        &kinds,
    );
    let lease_length = Duration::from_millis(settings.lease_ms);
    let lease = Arc::new(lease::Lease::new(executors.sandbox(), lease_length));
    let registering = lease::Lease::now();
    workers::register(
        &node.store,
        workers::NewWorker {
            identity: &identity,
            host: &host,
            pid: std::process::id(),
            groups: &settings.groups,
            kinds: &kinds,
            concurrency: settings.concurrency,
            inline_concurrency: settings.inline_concurrency,
            lease: lease_length,
        },
    )
    .await
    .map_err(WorkerError::Register)?;
    lease.renewed(registering, lease_length);
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
        submit_batch: settings.submit_batch(),
        executors,
        transitions,
        process_slots: Arc::new(Semaphore::new(usize::from(settings.concurrency))),
        inline_slots: Arc::new(Semaphore::new(usize::from(settings.inline_concurrency))),
        inline_prefetch: settings.inline_concurrency.max(1),
        attempts: TaskTracker::new(),
        held: Mutex::new(HashMap::new()),
        drain_requested: CancellationToken::new(),
        draining: CancellationToken::new(),
        stop_attempts: CancellationToken::new(),
        hard_stop: CancellationToken::new(),
        submitters: submitters::Submitters::new(
            node.settings.amqp_users.clone(),
            node.settings.api_token.is_some(),
        ),
        lease,
        takes: settings.take_submissions.then(|| {
            (
                settings.groups.iter().cloned().collect(),
                kinds.iter().cloned().collect(),
            )
        }),
    });
    let span = info_span!("worker", name = %worker.identity.name);
    let lease = worker.lease.clone();
    async {
        info!(
            groups = ?settings.groups,
            concurrency = settings.concurrency,
            inline_concurrency = settings.inline_concurrency,
            "worker online"
        );
        // No delivery is taken before the worker has its liveness session.
        let session = loop {
            match tokio::time::timeout(
                HEARTBEAT_TIMEOUT,
                workers::LivenessSession::open(&worker.store),
            )
            .await
            {
                Ok(Ok(session)) => break session,
                Ok(Err(error)) => warn!(%error, "cannot open the liveness session; retrying"),
                Err(_) => warn!("opening the liveness session timed out; retrying"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => {
                    let _ = workers::set_status(&worker.store, worker.identity.id, "offline").await;
                    return;
                }
                _ = tokio::time::sleep(workers::HEARTBEAT_INTERVAL) => {}
            }
        };
        // The liveness session and its heartbeats go on while draining: a long task must not
        // make its worker look dead.
        let stop_heartbeat = CancellationToken::new();
        let heartbeat = tokio::spawn(liveness_loop(
            worker.clone(),
            session,
            stop_heartbeat.clone(),
        ));
        let consumers = TaskTracker::new();
        let topology = worker.topology().clone();
        for group in &settings.groups {
            for (queue, kind) in [
                (topology.group_queue(group), QueueKind::Group),
                (topology.inline_queue(group), QueueKind::Inline),
            ] {
                consumers.spawn(consumer::consume(
                    worker.clone(),
                    queue,
                    kind,
                    worker.draining.clone(),
                ));
            }
        }
        consumers.spawn(consumer::consume(
            worker.clone(),
            topology.submit_exchange(),
            QueueKind::Submit,
            worker.draining.clone(),
        ));
        consumers.close();
        if worker.takes.is_some() {
            node.local_worker
                .set(Some(Arc::new(Offered(worker.clone()))));
        }
        // Kill commands must reach running attempts while the worker drains: this consumer stops
        // with the heartbeat, after the last attempt.
        let stop_control = CancellationToken::new();
        let control = tokio::spawn(consumer::consume(
            worker.clone(),
            topology.worker_queue(&worker.identity.id.to_string()),
            QueueKind::Control,
            stop_control.clone(),
        ));

        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = worker.drain_requested.cancelled() => info!("drain requested"),
        }
        info!("draining");
        // Consumers stop before anything else: a submission taken after the signal would be
        // recorded by a process on its way out (into the store it was started on, which an
        // operator replacing it may no longer read) while its successor is already consuming.
        worker.draining.cancel();
        node.local_worker.set(None);
        mark(&worker, "draining").await;
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
        mark(&worker, "offline").await;
        info!("worker offline");
    }
    .instrument(span)
    .await;
    if lease.without_guard() {
        return Err(WorkerError::GuardLost);
    }
    Ok(())
}

/// A worker offered to the other services of its process (`chime up`'s API), to take the
/// submissions they record as it takes those of the submit queue.
struct Offered(Arc<Worker>);

impl LocalWorker for Offered {
    fn identity(&self) -> &WorkerIdentity {
        &self.0.identity
    }

    fn slot_to_take(&self, task: &NewTask, group: &str) -> Option<LocalSlot> {
        let permit = self.0.slot_to_take(task, group)?;
        Some(LocalSlot::new(permit, self.0.attempts.token()))
    }

    fn run_taken(&self, message: TaskMessage, slot: LocalSlot) {
        // Spawned on the attempts' tracker before the slot's own hold on it is let go.
        let (permit, drain_waits) = slot.into_parts();
        self.0.run_taken(message, permit);
        drop(drain_waits);
    }
}

/// How long a stopping worker waits to record its status (draining, then offline): on a
/// database that does not answer, its lease running out says as much.
const STATUS_WAIT: Duration = Duration::from_secs(2);

/// Records the stopping worker's status, waiting at most [`STATUS_WAIT`].
async fn mark(worker: &Worker, status: &str) {
    match tokio::time::timeout(
        STATUS_WAIT,
        workers::set_status(&worker.store, worker.identity.id, status),
    )
    .await
    {
        Ok(Ok(())) => {}
        Ok(Err(error)) => warn!(%error, status, "cannot record the worker's status"),
        Err(_) => warn!(status, "the worker's status was not recorded in time"),
    }
}

/// Once per lapse of the lease, as soon as the worker sees it: abandons every running attempt
/// (they end lost; the guard kills what is left at its own deadline).
fn fence_if_lapsed(worker: &Worker, fenced: &mut bool) {
    if worker.lease.held() || *fenced {
        return;
    }
    *fenced = true;
    worker.lease.lapsed();
    info!("the lease ran out unrenewed");
    let abandoned = worker.abandon(None);
    if abandoned > 0 {
        warn!(
            abandoned,
            "the lease ran out unrenewed; abandoning running attempts before anyone can recover them"
        );
    }
    metrics::counter!("chime_worker_self_fenced_total").increment(abandoned as u64);
}

/// How long opening the liveness session, or one heartbeat, may take before it is tried again.
/// Long enough for a session to open over a slow link (five or six round trips of a second);
/// the lease is not waited past meanwhile (see [`awaiting`]).
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many recent heartbeats the lease's length is fitted to (ten seconds of them).
const RECENT_HEARTBEATS: usize = 40;

/// Awaits `answer` for up to `limit`, fencing the worker's attempts as soon as its lease lapses
/// meanwhile: a slow answer is worth waiting for (it renews the lease), but never with attempts
/// running past the lease.
async fn awaiting<T>(
    worker: &Worker,
    fenced: &mut bool,
    limit: Duration,
    answer: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::pin!(answer);
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        tokio::select! {
            out = &mut answer => return Some(out),
            () = tokio::time::sleep(workers::HEARTBEAT_INTERVAL / 5) => {
                fence_if_lapsed(worker, fenced);
                if tokio::time::Instant::now() >= deadline {
                    return None;
                }
            }
        }
    }
}

/// Attempts [`Worker::claim_orphans`] claimed, let go when dropped.
struct Claimed {
    worker: Arc<Worker>,
    keys: Vec<AttemptKey>,
}

impl Drop for Claimed {
    fn drop(&mut self) {
        for key in &self.keys {
            self.worker.let_go(*key);
        }
    }
}

/// Releases `orphans` (claimed) as never run, trying again while the database does not answer,
/// until `stop`: let go after an error, a release whose commit landed unheard would leave them
/// free to be taken here again before it shows.
async fn release_unheld(worker: &Worker, orphans: &[AttemptKey], stop: &CancellationToken) {
    let mut delay = Duration::from_millis(100);
    loop {
        match task_lifecycle::release_attempts(
            &worker.store,
            worker.topology(),
            &worker.identity,
            orphans,
            task_lifecycle::Release::NeverRan,
        )
        .await
        {
            Ok(released) => {
                warn!(
                    released,
                    "released attempts started under this worker that it never ran"
                );
                metrics::counter!("chime_worker_unheld_released_total").increment(released as u64);
                return;
            }
            Err(error) => {
                warn!(%error, ?delay, "cannot release attempts this worker never ran; retrying")
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Renews the worker's lease over its liveness session every [`workers::HEARTBEAT_INTERVAL`]
/// and acts on what each heartbeat learns: kills whose command was missed, attempts taken from
/// this worker (abandoned at once), attempts running here that it does not hold (released once
/// seen twice: an attempt whose start was being committed when the first heartbeat looked is held
/// by the second; held as releasing meanwhile, so a delivery of it is dropped, not run). A
/// session that fails is opened again at once. When the lease runs out
/// unrenewed, every running attempt is abandoned (see [`lease`]); a refusal by the database
/// server holds the lease on under a grace mark on the broker instead (`refusal_grace`).
async fn liveness_loop(
    worker: Arc<Worker>,
    first: workers::LivenessSession,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(workers::HEARTBEAT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut session: Option<workers::LivenessSession> = Some(first);
    let mut suspects: HashSet<AttemptKey> = HashSet::new();
    let mut fenced = false;
    let mut releasing: Option<tokio::task::JoinHandle<()>> = None;
    let mut grace: Option<tokio::task::JoinHandle<()>> = None;
    let mut round_trips: std::collections::VecDeque<Duration> = std::collections::VecDeque::new();
    let mut warned_slow: Option<tokio::time::Instant> = None;
    async {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            // Found gone here, or by a deadline that could not be told (then `guard_lost` has
            // nothing left to report): either way the worker drains and stops.
            if worker.lease.guard_lost()
                || (worker.lease.without_guard() && !worker.drain_requested.is_cancelled())
            {
                error!(
                    "the worker's guard is gone (killed?): nothing would kill this worker's \
                     attempts if it froze; ending them and stopping, to be started again with a \
                     new guard"
                );
                worker.drain_requested.cancel();
            }
            fence_if_lapsed(&worker, &mut fenced);
            let live = match session.as_mut() {
                Some(live) => live,
                None => {
                    let asked_at = lease::Lease::now();
                    let opened = awaiting(
                        &worker,
                        &mut fenced,
                        HEARTBEAT_TIMEOUT,
                        workers::LivenessSession::open(&worker.store),
                    )
                    .await;
                    fence_if_lapsed(&worker, &mut fenced);
                    match opened {
                        Some(Ok(opened)) => {
                            info!("liveness session open again");
                            session.insert(opened)
                        }
                        Some(Err(error)) => {
                            if workers::LivenessSession::server_is_down(&error) {
                                // Once per grace: a failover's refusals come every heartbeat.
                                if grace.as_ref().is_some_and(|g| !g.is_finished()) {
                                    debug!(%error, "the database still refuses this worker");
                                } else {
                                    warn!(%error, "the database refuses this worker");
                                }
                                refusal_grace::enter(&worker, asked_at, &mut grace);
                            } else {
                                warn!(%error, "cannot open the liveness session; retrying");
                            }
                            continue;
                        }
                        None => {
                            warn!("opening the liveness session timed out; retrying");
                            continue;
                        }
                    }
                }
            };
            let (running, all) = worker.held_attempts();
            let status = if worker.draining.is_cancelled() {
                "draining"
            } else {
                "online"
            };
            // Fitted to the slowest recent round trip: PostgreSQL slow for every worker lengthens
            // every lease instead of ending every attempt.
            let slowest = round_trips.iter().max().copied().unwrap_or_default();
            let length = worker.lease.length_for(slowest);
            let sent_at = lease::Lease::now();
            let started = tokio::time::Instant::now();
            let beat = awaiting(
                &worker,
                &mut fenced,
                HEARTBEAT_TIMEOUT,
                live.heartbeat(worker.identity.id, status, &running, &all, length),
            )
            .await;
            let took = started.elapsed();
            if round_trips.len() == RECENT_HEARTBEATS {
                round_trips.pop_front();
            }
            round_trips.push_back(took);
            metrics::histogram!("chime_worker_heartbeat_seconds").record(took.as_secs_f64());
            let budget = lease::Lease::round_trip_budget(worker.lease.configured());
            if took > budget / 2 && warned_slow.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
                warned_slow = Some(tokio::time::Instant::now());
                warn!(
                    took_ms = took.as_millis() as u64,
                    budget_ms = budget.as_millis() as u64,
                    lease_ms = worker.lease.length_for(took).as_millis() as u64,
                    "heartbeats to PostgreSQL are slow: the lease is lengthened to bear them; \
                     past the budget attempts end (raise worker.lease_ms for a slow link)"
                );
            }
            // A lease that ran out while the heartbeat was under way is fenced before the
            // renewal: what ran under it is abandoned, whatever the renewal says.
            fence_if_lapsed(&worker, &mut fenced);
            let beat = match beat {
                Some(Ok(beat)) => beat,
                Some(Err(error)) => {
                    warn!(%error, "heartbeat failed; opening a new liveness session");
                    session = None;
                    tick.reset_immediately();
                    continue;
                }
                None => {
                    warn!("heartbeat did not answer; opening a new liveness session");
                    session = None;
                    tick.reset_immediately();
                    continue;
                }
            };
            if fenced {
                info!("lease renewed");
                fenced = false;
            }
            worker.lease.renewed(sent_at, length);
            metrics::counter!("chime_worker_heartbeats_total").increment(1);
            for (task_id, attempt) in beat.kill {
                if worker.kill(task_id, attempt) {
                    info!(%task_id, attempt, "killing a task whose kill command was missed");
                }
            }
            if !beat.taken.is_empty() {
                let abandoned = worker.abandon(Some(&beat.taken));
                if abandoned > 0 {
                    warn!(abandoned, "attempts were recovered elsewhere (this worker was presumed dead); killing them");
                    metrics::counter!("chime_worker_self_fenced_total").increment(abandoned as u64);
                }
            }
            let unheld: HashSet<AttemptKey> = beat.unheld.into_iter().collect();
            let orphans: Vec<AttemptKey> = unheld.intersection(&suspects).copied().collect();
            suspects = unheld;
            // Released on a task of its own, one batch at a time: a slow pool must not hold up
            // the next renewal. Orphans left while a batch is under way are found again.
            let orphans = if releasing.as_ref().is_none_or(|r| r.is_finished()) {
                worker.claim_orphans(&orphans)
            } else {
                Vec::new()
            };
            if !orphans.is_empty() {
                let worker = worker.clone();
                let stop = stop.clone();
                releasing = Some(tokio::spawn(
                    async move {
                        // Let go however the release ends, a panic included: a key left
                        // releasing would be held for good, never found unheld again.
                        let _claimed = Claimed {
                            worker: worker.clone(),
                            keys: orphans.clone(),
                        };
                        release_unheld(&worker, &orphans, &stop).await;
                    }
                    .in_current_span(),
                ));
            }
        }
        if let Some(releasing) = releasing {
            let _ = releasing.await;
        }
        // A stopped worker holds nothing on: its grace ends with it (the mark goes with its
        // broker connection).
        if let Some(grace) = grace {
            grace.abort();
        }
        if let Some(live) = session {
            live.close().await;
        }
    }
    .instrument(info_span!("liveness"))
    .await
}
