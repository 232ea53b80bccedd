//! Where `POST /api/v1/tasks` requests become tasks: those that arrive together share a commit.
//!
//! A handler checks its submission (shape, execute user, submitter) and queues it here; one loop
//! takes whatever is queued (up to [`MAX_BATCH`]) and hands it to a committer, at most
//! [`COMMITTERS`] at once. An idle API so commits each request at once; under load, requests queue
//! while the committers are busy and the next commit takes them all: the window is the previous
//! commit, with no timer to wait on. Each request is answered only after its own row committed;
//! an unknown kind or group fails that request alone.
//!
//! The worker group a (kind, group) goes to is looked up once and used again for
//! [`ROUTE_TTL`]: the lookup was a second round trip on every commit's way, and it cost the door
//! a fifth of its rate. Only a route found is kept (an unknown kind or group is looked up each
//! time, so a worker that starts offering a kind is seen at once); a kind route or worker group
//! changed through this API is seen at once ([`Submissions::forget_routes`]), through another
//! process within [`ROUTE_TTL`].
//!
//! When a worker runs in the same process (`chime up`), it takes the noop and http tasks it has
//! an inline slot free for, as it takes those it records from the submit queue: the commit
//! writes them `ready` under it with no task message, and it starts them once the commit is in
//! ([`chime_core::node::LocalWorker`]). They skip the broker both ways.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chime_core::bus::Topology;
use chime_core::model::{NewTask, TaskView};
use chime_core::node::{LocalSlot, LocalWorkerSlot};
use chime_core::store::{Store, StoreError, task_lifecycle, tasks};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tracing::{Instrument, info_span, warn};

use crate::error::ApiError;

/// Most submissions in one commit.
pub const MAX_BATCH: usize = 1000;

/// Commits in flight at once: one being written while the next batch gathers, and a spare.
const COMMITTERS: usize = 2;

/// How long a route found for a (kind, group) is used without looking it up again.
pub const ROUTE_TTL: Duration = Duration::from_secs(1);

/// A route's (kind, explicit group).
type RouteKey = (String, Option<String>);
/// How many times the routes were forgotten, and the routes kept since: (kind, explicit group) →
/// (when found, the worker group).
type Kept = (u64, HashMap<RouteKey, (Instant, String)>);

/// The routes found lately. A lookup that began before a forget is not kept after it: it may
/// have read the route that was changed.
#[derive(Debug, Default)]
struct Routes(Mutex<Kept>);

impl Routes {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fresh(&self, kind: &str, group: Option<&str>) -> Option<String> {
        self.kept()
            .1
            .get(&(kind.to_string(), group.map(str::to_string)))
            .filter(|(found, _)| found.elapsed() < ROUTE_TTL)
            .map(|(_, routed)| routed.clone())
    }

    /// How many times the routes were forgotten so far.
    fn forgotten(&self) -> u64 {
        self.kept().0
    }

    /// Keeps a route found by a lookup that began when [`Routes::forgotten`] said `forgotten`.
    fn keep(&self, forgotten: u64, kind: &str, group: Option<&str>, found: Instant, routed: &str) {
        let mut kept = self.kept();
        if kept.0 != forgotten {
            return;
        }
        // Kinds come from clients: what is stale goes, so the map holds a second's worth.
        kept.1.retain(|_, (at, _)| at.elapsed() < ROUTE_TTL);
        kept.1.insert(
            (kind.to_string(), group.map(str::to_string)),
            (found, routed.to_string()),
        );
    }

    fn forget(&self) {
        let mut kept = self.kept();
        kept.0 += 1;
        kept.1.clear();
    }
}

/// A submission's answer: whether it made the task (false: the id existed), and the task.
pub type Answer = Result<(bool, TaskView), ApiError>;

/// The queue of submissions waiting for a commit; cheap to clone.
#[derive(Clone, Debug)]
pub struct Submissions {
    queue: mpsc::UnboundedSender<(NewTask, oneshot::Sender<Answer>)>,
    routes: Arc<Routes>,
}

impl Submissions {
    /// Starts the loop that commits what is queued, handing what it can to `local_worker`'s
    /// worker; it ends when every handle is dropped.
    pub fn start(store: Store, topology: Topology, local_worker: Arc<LocalWorkerSlot>) -> Self {
        let (queue, pending) = mpsc::unbounded_channel();
        let routes = Arc::new(Routes::default());
        let committer = Committer {
            store,
            topology,
            routes: routes.clone(),
            local_worker,
        };
        tokio::spawn(
            commit_loop(Arc::new(committer), pending).instrument(info_span!("submission_commits")),
        );
        Self { queue, routes }
    }

    /// Drops the routes kept: this API changed a kind route or a worker group.
    pub fn forget_routes(&self) {
        self.routes.forget();
    }

    /// Writes `task` (checked already) with whatever else is queued, and answers once it is
    /// committed.
    pub async fn submit(&self, task: NewTask) -> Answer {
        let (answer, answered) = oneshot::channel();
        if self.queue.send((task, answer)).is_err() {
            return Err(stopped());
        }
        answered.await.unwrap_or_else(|_| Err(stopped()))
    }
}

fn stopped() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the API is stopping")
}

/// What a commit needs.
struct Committer {
    store: Store,
    topology: Topology,
    routes: Arc<Routes>,
    local_worker: Arc<LocalWorkerSlot>,
}

async fn commit_loop(
    committer: Arc<Committer>,
    mut pending: mpsc::UnboundedReceiver<(NewTask, oneshot::Sender<Answer>)>,
) {
    let committers = Arc::new(Semaphore::new(COMMITTERS));
    loop {
        // A free committer first, so that requests gather in the queue while all are busy.
        let Ok(permit) = committers.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = pending.recv().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match pending.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        metrics::histogram!("chime_api_submission_batch_size").record(batch.len() as f64);
        let committer = committer.clone();
        tokio::spawn(
            async move {
                commit(&committer, batch).await;
                drop(permit);
            }
            .in_current_span(),
        );
    }
}

/// Writes a batch in one commit, hands the tasks it took to the local worker, and answers each
/// request.
async fn commit(committer: &Committer, batch: Vec<(NewTask, oneshot::Sender<Answer>)>) {
    let (store, topology, routes) = (&committer.store, &committer.topology, &committer.routes);
    let (tasks, answers): (Vec<NewTask>, Vec<oneshot::Sender<Answer>>) = batch.into_iter().unzip();
    let groups = match route(store, routes, &tasks).await {
        Ok(groups) => groups,
        Err(error) => return fail_all(answers, &error),
    };
    let mut routed = Vec::with_capacity(tasks.len());
    let mut waiting = Vec::with_capacity(tasks.len());
    for ((task, answer), group) in tasks.iter().zip(answers).zip(groups) {
        match group {
            Ok(group) => {
                routed.push((task, group));
                waiting.push(answer);
            }
            Err(refusal) => {
                let _ = answer.send(Err(refusal.into()));
            }
        }
    }
    let rows: Vec<(&NewTask, &str)> = routed
        .iter()
        .map(|(task, group)| (*task, group.as_str()))
        .collect();
    // The slots of the tasks the local worker runs itself; given back if the commit fails.
    let worker = committer.local_worker.get();
    let mut slots: Vec<Option<LocalSlot>> = rows
        .iter()
        .map(|&(task, group)| worker.as_ref()?.slot_to_take(task, group))
        .collect();
    let flags: Vec<bool> = slots.iter().map(Option::is_some).collect();
    let taking = worker
        .as_ref()
        .filter(|_| flags.contains(&true))
        .map(|w| (w.identity(), &flags[..]));
    let written = match task_lifecycle::submit_routed_shown(store, topology, &rows, taking).await {
        Ok(shown) => shown,
        Err(error) if error.is_refused_data() && rows.len() > 1 => {
            // One request carries what PostgreSQL refuses: each goes alone (through the queue),
            // so only it fails.
            drop(slots);
            for (row, answer) in rows.into_iter().zip(waiting) {
                let single =
                    task_lifecycle::submit_routed_shown(store, topology, &[row], None).await;
                let answered = match single {
                    Ok(mut one) => match one.submitted.first() {
                        Some(s) => shown(store, *s, &mut one.views).await,
                        None => Err(stopped()),
                    },
                    Err(error) => Err(refused(error)),
                };
                let _ = answer.send(answered);
            }
            return;
        }
        Err(error) if error.is_refused_data() => {
            for answer in waiting {
                let _ = answer.send(Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    error.to_string(),
                )));
            }
            return;
        }
        Err(error) => return fail_all(waiting, &error),
    };
    let task_lifecycle::Shown {
        submitted,
        mut views,
        taken,
    } = written;
    metrics::counter!("chime_api_tasks_submitted_total").increment(submitted.len() as u64);
    // The taken tasks this commit made, in order, started before the answers; a taken one whose
    // id existed already has its own message or runner, and gives its slot back.
    if let Some(worker) = &worker {
        let mut taken = taken.into_iter();
        for (told, slot) in submitted.iter().zip(&mut slots) {
            if let Some(slot) = slot.take()
                && told.created
                && let Some(message) = taken.next()
            {
                worker.run_taken(message, slot);
            }
        }
    }
    drop(slots);
    for (submission, answer) in submitted.into_iter().zip(waiting) {
        let _ = answer.send(shown(store, submission, &mut views).await);
    }
}

/// The worker group of each task, in order: a route kept from the last [`ROUTE_TTL`], else
/// looked up (one lookup for every task without one), and kept if found.
async fn route(
    store: &Store,
    routes: &Routes,
    tasks: &[NewTask],
) -> Result<Vec<Result<String, StoreError>>, StoreError> {
    let mut groups: Vec<Option<Result<String, StoreError>>> = tasks
        .iter()
        .map(|task| routes.fresh(&task.kind, task.group.as_deref()).map(Ok))
        .collect();
    let unrouted: Vec<&NewTask> = tasks
        .iter()
        .zip(&groups)
        .filter(|(_, group)| group.is_none())
        .map(|(task, _)| task)
        .collect();
    if !unrouted.is_empty() {
        let (asked, forgotten) = (Instant::now(), routes.forgotten());
        let found = task_lifecycle::route_submissions(store, &unrouted).await?;
        let mut found = found.into_iter();
        for (task, group) in tasks.iter().zip(groups.iter_mut()) {
            if group.is_none() {
                let routed = found.next().unwrap_or_else(|| Err(stopped_routing()));
                if let Ok(routed) = &routed {
                    routes.keep(forgotten, &task.kind, task.group.as_deref(), asked, routed);
                }
                *group = Some(routed);
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|group| group.unwrap_or_else(|| Err(stopped_routing())))
        .collect())
}

/// What a task without a route is given if the lookup answered fewer than asked (it cannot).
fn stopped_routing() -> StoreError {
    StoreError::Invalid("the submission could not be routed".into())
}

/// The answer for one submission: the task as its insert wrote it, or, when it existed already
/// (or came twice in the batch), as it is now.
async fn shown(
    store: &Store,
    submission: task_lifecycle::Submitted,
    views: &mut HashMap<uuid::Uuid, TaskView>,
) -> Answer {
    let view = match views.remove(&submission.id) {
        Some(view) if submission.created => Ok(view),
        _ => tasks::get(store, submission.id).await,
    };
    view.map(|view| (submission.created, view))
        .map_err(ApiError::from)
}

/// The answer to a request the store could not write: 422 if PostgreSQL refused what it
/// carries (the client's to mend), else as any store error.
fn refused(error: StoreError) -> ApiError {
    if error.is_refused_data() {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string())
    } else {
        ApiError::from(error)
    }
}

/// Answers every request of a batch that could not be written with the store's error.
fn fail_all(answers: Vec<oneshot::Sender<Answer>>, error: &StoreError) {
    warn!(%error, submissions = answers.len(), "cannot record the submissions");
    for answer in answers {
        let _ = answer.send(Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            error.to_string(),
        )));
    }
}
