//! Where `POST /api/v1/tasks` requests become tasks: those that arrive together share a commit.
//!
//! A handler checks its submission (shape, execute user, submitter) and queues it here; one loop
//! takes whatever is queued (up to [`MAX_BATCH`]) and hands it to a committer, at most
//! [`COMMITTERS`] at once. An idle API so commits each request at once; under load, requests queue
//! while the committers are busy and the next commit takes them all: the window is the previous
//! commit, with no timer to wait on. Each request is answered only after its own row committed;
//! an unknown kind or group fails that request alone.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;
use chime_core::bus::Topology;
use chime_core::model::{NewTask, TaskView};
use chime_core::store::{Store, StoreError, task_lifecycle, tasks};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tracing::{Instrument, info_span, warn};

use crate::error::ApiError;

/// Most submissions in one commit.
pub const MAX_BATCH: usize = 1000;

/// Commits in flight at once: one being written while the next batch gathers, and a spare.
const COMMITTERS: usize = 2;

/// A submission's answer: whether it made the task (false: the id existed), and the task.
pub type Answer = Result<(bool, TaskView), ApiError>;

/// The queue of submissions waiting for a commit; cheap to clone.
#[derive(Clone, Debug)]
pub struct Submissions {
    queue: mpsc::UnboundedSender<(NewTask, oneshot::Sender<Answer>)>,
}

impl Submissions {
    /// Starts the loop that commits what is queued; it ends when every handle is dropped.
    pub fn start(store: Store, topology: Topology) -> Self {
        let (queue, pending) = mpsc::unbounded_channel();
        tokio::spawn(
            commit_loop(store, topology, pending).instrument(info_span!("submission_commits")),
        );
        Self { queue }
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

async fn commit_loop(
    store: Store,
    topology: Topology,
    mut pending: mpsc::UnboundedReceiver<(NewTask, oneshot::Sender<Answer>)>,
) {
    let committers = Arc::new(Semaphore::new(COMMITTERS));
    loop {
        // A free committer first, so that requests gather in the queue while all are busy.
        let Ok(committer) = committers.clone().acquire_owned().await else {
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
        let (store, topology) = (store.clone(), topology.clone());
        tokio::spawn(
            async move {
                commit(&store, &topology, batch).await;
                drop(committer);
            }
            .in_current_span(),
        );
    }
}

/// Writes a batch in one commit and answers each request.
async fn commit(
    store: &Store,
    topology: &Topology,
    batch: Vec<(NewTask, oneshot::Sender<Answer>)>,
) {
    let (tasks, answers): (Vec<NewTask>, Vec<oneshot::Sender<Answer>>) = batch.into_iter().unzip();
    let refs: Vec<&NewTask> = tasks.iter().collect();
    let groups = match task_lifecycle::route_submissions(store, &refs).await {
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
    let (submitted, mut views) =
        match task_lifecycle::submit_routed_shown(store, topology, &rows).await {
            Ok(shown) => shown,
            Err(error) if error.is_refused_data() && rows.len() > 1 => {
                // One request carries what PostgreSQL refuses: each goes alone, so only it fails.
                for (row, answer) in rows.into_iter().zip(waiting) {
                    let single = task_lifecycle::submit_routed_shown(store, topology, &[row]).await;
                    let answered = match single {
                        Ok((one, mut views)) => match one.first() {
                            Some(s) => shown(store, *s, &mut views).await,
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
    metrics::counter!("chime_api_tasks_submitted_total").increment(submitted.len() as u64);
    for (submission, answer) in submitted.into_iter().zip(waiting) {
        let _ = answer.send(shown(store, submission, &mut views).await);
    }
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
