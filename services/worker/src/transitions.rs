//! Where a worker commits its task transitions: attempts started (`ready → running`), ended
//! (`running → succeeded | retrying | failed | killed`) and, for attempts with nothing to run,
//! completed (`ready → succeeded`), batched.
//!
//! Each delivery asks for its transition and waits for the answer; one loop per kind of transition
//! takes every request that is waiting and commits them in one statement
//! ([`task_lifecycle::start_attempts`], [`task_lifecycle::finish_attempts`],
//! [`task_lifecycle::complete_instant_attempts`]), with up to [`IN_FLIGHT`] statements of a kind
//! committing at once. Under load a batch holds whatever arrived while the others were
//! committing, so a busy worker makes a few commits per round instead of two per task; an idle
//! worker commits a lone request at once. The answer comes after the commit, so a delivery is
//! still acked only once its outcome is durable.
//!
//! A request says whether a broker delivery waits on it ([`Pace`]). One that does is committed
//! by the next statement of its kind: its ack, and so the next delivery prefetch lets in, waits
//! for that commit. One that does not (a task the worker took at submission, with no delivery)
//! lets a statement already committing finish first and goes with whatever gathered meanwhile,
//! unless [`GATHER`] requests wait or the oldest has waited [`LINGER`] (a timer tick more at
//! most): a statement costs PostgreSQL about as much as a dozen more rows in it, and such tasks
//! arrive a few at a time.
//! During single `POST /api/v1/tasks` requests into `chime up`, 8,000 tasks' completions took
//! 832–868 statements instead of 1,266–1,327.
//!
//! Statements of a kind committing at once never wait for each other's rows: a worker holds one
//! delivery per attempt, so their tasks differ, and the triggers an end releases belong to jobs
//! that run one task at a time, whose task is in one batch only.

use std::collections::HashMap;
use std::sync::Arc;

use chime_core::bus::Topology;
use chime_core::model::{TaskMessage, TaskStatus};
use chime_core::store::task_lifecycle::{self, FinishedAttempt, WorkerIdentity};
use chime_core::store::{Store, StoreError};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, Instant};
use tracing::{Instrument, info_span};
use uuid::Uuid;

/// The most transitions one statement carries.
const MAX_BATCH: usize = 1000;

/// Statements of one kind committing at once. With one, PostgreSQL ran a busy worker's
/// statements on one core while the other waited for them: two gave `chime bench tasks` 1–9 %
/// more (four pairs of runs, alternating).
const IN_FLIGHT: usize = 2;

/// How many unhurried requests start a statement while another of their kind commits.
const GATHER: usize = 32;

/// The longest an unhurried request waits for company while another statement of its kind
/// commits.
const LINGER: Duration = Duration::from_millis(2);

/// Whether a broker delivery waits on a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// A delivery's ack waits on it: the next statement of its kind takes it.
    Prompt,
    /// No ack waits on it: it may wait a moment (2–3 ms at most) to share a statement. Its
    /// task keeps its inline slot meanwhile, so an inline delivery waiting for a slot may wait
    /// that much longer.
    Unhurried,
}

/// What a transition gave back when it was made (None: the attempt was not in the expected
/// state), or why the database could not be asked.
pub type Answer<V> = Result<Option<V>, Arc<StoreError>>;

struct Request<T, V> {
    item: T,
    pace: Pace,
    reply: oneshot::Sender<Answer<V>>,
}

/// Handle on the two batching loops; cheap to clone. The loops end when every handle is dropped.
#[derive(Clone, Debug)]
pub struct Transitions {
    starts: mpsc::UnboundedSender<Request<TaskMessage, TaskMessage>>,
    ends: mpsc::UnboundedSender<Request<FinishedAttempt, TaskStatus>>,
    completions: mpsc::UnboundedSender<Request<TaskMessage, TaskStatus>>,
}

impl Transitions {
    /// Starts the loops for `worker`.
    pub fn start(store: Store, topology: Topology, worker: WorkerIdentity) -> Self {
        let (starts, start_rx) = mpsc::unbounded_channel();
        let (ends, end_rx) = mpsc::unbounded_channel();
        let (completions, completion_rx) = mpsc::unbounded_channel();
        let (s, w) = (store.clone(), worker.clone());
        tokio::spawn(
            run(start_rx, "start", move |batch: Vec<TaskMessage>| {
                let (s, w) = (s.clone(), w.clone());
                async move {
                    let started = task_lifecycle::start_attempts(&s, &w, &batch).await?;
                    Ok(started
                        .into_iter()
                        .map(|m| ((m.task_id, m.attempt), m))
                        .collect())
                }
            })
            .instrument(info_span!("attempt_starts")),
        );
        let (s, t, w) = (store.clone(), topology.clone(), worker.clone());
        tokio::spawn(
            run(end_rx, "finish", move |batch: Vec<FinishedAttempt>| {
                let (s, t, w) = (s.clone(), t.clone(), w.clone());
                async move { task_lifecycle::finish_attempts(&s, &t, &w, &batch).await }
            })
            .instrument(info_span!("attempt_ends")),
        );
        tokio::spawn(
            run(completion_rx, "complete", move |batch: Vec<TaskMessage>| {
                let (s, t, w) = (store.clone(), topology.clone(), worker.clone());
                async move { task_lifecycle::complete_instant_attempts(&s, &t, &w, &batch).await }
            })
            .instrument(info_span!("attempt_completions")),
        );
        Self {
            starts,
            ends,
            completions,
        }
    }

    /// `ready → running` for the attempt of this message, if its task's row records the same:
    /// the attempt as the row records it (what to run), or None if it was not ready (duplicate,
    /// stale, killed) or the message differs from the row.
    pub async fn start_attempt(&self, message: TaskMessage, pace: Pace) -> Answer<TaskMessage> {
        ask(&self.starts, message, pace).await
    }

    /// `ready → succeeded` for the attempt of this message, which has nothing to run, if its
    /// task's row records the same: the status it moved to, or None as for a start.
    pub async fn complete_attempt(&self, message: TaskMessage, pace: Pace) -> Answer<TaskStatus> {
        ask(&self.completions, message, pace).await
    }

    /// Records the attempt's end: the status its task moved to, or None if the attempt is no
    /// longer this worker's.
    pub async fn finish_attempt(
        &self,
        finished: FinishedAttempt,
        pace: Pace,
    ) -> Answer<TaskStatus> {
        ask(&self.ends, finished, pace).await
    }
}

async fn ask<T, V>(queue: &mpsc::UnboundedSender<Request<T, V>>, item: T, pace: Pace) -> Answer<V> {
    let (reply, answer) = oneshot::channel();
    let gone = || Arc::new(StoreError::Invalid("the worker is stopping".into()));
    queue
        .send(Request { item, pace, reply })
        .map_err(|_| gone())?;
    answer.await.map_err(|_| gone())?
}

/// What a batch's statement gave back, by `(task, attempt)`.
type Made<V> = Vec<((Uuid, i32), V)>;

/// Something a transition is about: its `(task, attempt)`.
trait Keyed {
    fn key(&self) -> (Uuid, i32);
}

impl Keyed for (Uuid, i32) {
    fn key(&self) -> (Uuid, i32) {
        *self
    }
}

impl Keyed for TaskMessage {
    fn key(&self) -> (Uuid, i32) {
        (self.task_id, self.attempt)
    }
}

impl Keyed for FinishedAttempt {
    fn key(&self) -> (Uuid, i32) {
        (self.task_id, self.attempt)
    }
}

/// Commits the waiting requests whenever fewer than [`IN_FLIGHT`] batches are committing and
/// [`Waiting::ready_to_commit`] says they should go, answering each; until every sender is gone
/// and every batch answered.
async fn run<T, V, F, Fut>(
    mut queue: mpsc::UnboundedReceiver<Request<T, V>>,
    kind: &'static str,
    commit: F,
) where
    T: Keyed + Clone,
    F: Fn(Vec<T>) -> Fut,
    Fut: Future<Output = Result<Made<V>, StoreError>>,
{
    let commit = &commit;
    let mut in_flight = FuturesUnordered::new();
    let mut waiting: Vec<Request<T, V>> = Vec::with_capacity(MAX_BATCH);
    // When the oldest waiting request arrived, and whether a delivery waits on one.
    let mut oldest = Instant::now();
    let mut prompt = false;
    let mut open = true;
    loop {
        let free = in_flight.len() < IN_FLIGHT;
        let room = MAX_BATCH - waiting.len();
        let waited = Waiting {
            count: waiting.len(),
            oldest,
            prompt,
            more_may_come: open,
        };
        if free && waited.ready_to_commit(in_flight.len()) {
            let batch = std::mem::replace(&mut waiting, Vec::with_capacity(MAX_BATCH));
            prompt = false;
            in_flight.push(commit_batch(batch, kind, commit));
            continue;
        }
        tokio::select! {
            n = queue.recv_many(&mut waiting, room), if open && room > 0 => {
                if n == 0 {
                    open = false;
                } else {
                    if waiting.len() == n {
                        oldest = Instant::now();
                    }
                    let arrived = &waiting[waiting.len() - n..];
                    prompt |= arrived.iter().any(|r| r.pace == Pace::Prompt);
                }
            }
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            () = tokio::time::sleep_until(oldest + LINGER), if free && !waiting.is_empty() => {}
            else => break,
        }
    }
}

/// The requests waiting for a statement.
struct Waiting {
    count: usize,
    /// When the oldest arrived.
    oldest: Instant,
    /// Whether a delivery waits on one of them.
    prompt: bool,
    more_may_come: bool,
}

impl Waiting {
    /// Whether they go now, with `committing` statements of their kind in flight: when none
    /// is, when a delivery waits on one of them, when [`GATHER`] wait, when the oldest has
    /// waited [`LINGER`], or when no more can come.
    fn ready_to_commit(&self, committing: usize) -> bool {
        self.count > 0
            && (committing == 0
                || self.prompt
                || self.count >= GATHER
                || self.oldest.elapsed() >= LINGER
                || !self.more_may_come)
    }
}

/// Commits one batch and answers each of its requests.
async fn commit_batch<T, V, F, Fut>(batch: Vec<Request<T, V>>, kind: &'static str, commit: &F)
where
    T: Keyed + Clone,
    F: Fn(Vec<T>) -> Fut,
    Fut: Future<Output = Result<Made<V>, StoreError>>,
{
    let (items, replies): (Vec<T>, Vec<oneshot::Sender<Answer<V>>>) =
        batch.into_iter().map(|r| (r.item, r.reply)).unzip();
    let keys: Vec<(Uuid, i32)> = items.iter().map(Keyed::key).collect();
    metrics::histogram!("chime_worker_transition_batch", "kind" => kind).record(items.len() as f64);
    // A batch that fails is tried again one transition at a time, so a row the database
    // refuses fails only its own asker, not every transition that shared its statement.
    let singles = (items.len() > 1).then(|| items.clone());
    let answers: Vec<Answer<V>> = match (commit(items).await, singles) {
        (Err(_), Some(singles)) => {
            let mut answers = Vec::with_capacity(singles.len());
            for item in singles {
                answers.push(match commit(vec![item]).await {
                    Ok(made) => Ok(made.into_iter().next().map(|(_, v)| v)),
                    Err(error) => Err(Arc::new(error)),
                });
            }
            answers
        }
        (Ok(made), _) => {
            // One answer per transition made: the same attempt asked twice in one batch (a
            // duplicate delivery) moved once, so only its first asker may go on.
            let mut made: HashMap<(Uuid, i32), V> = made.into_iter().collect();
            keys.iter().map(|key| Ok(made.remove(key))).collect()
        }
        (Err(error), None) => vec![Err(Arc::new(error))],
    };
    for (reply, answer) in replies.into_iter().zip(answers) {
        let _ = reply.send(answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(count: usize, waited: Duration, prompt: bool, more_may_come: bool) -> Waiting {
        Waiting {
            count,
            oldest: Instant::now() - waited,
            prompt,
            more_may_come,
        }
    }

    #[test]
    fn unhurried_requests_wait_for_the_statement_in_flight_unless_many_or_old() {
        let fresh = Duration::ZERO;
        // Nothing committing: whatever waits goes.
        assert!(waiting(1, fresh, false, true).ready_to_commit(0));
        // One committing: a few fresh unhurried requests wait for it...
        assert!(!waiting(3, fresh, false, true).ready_to_commit(1));
        // ...but not when a delivery waits on one of them, when many wait, when the oldest
        // has waited long enough, or when the worker stops taking more.
        assert!(waiting(3, fresh, true, true).ready_to_commit(1));
        assert!(waiting(GATHER, fresh, false, true).ready_to_commit(1));
        assert!(waiting(3, LINGER, false, true).ready_to_commit(1));
        assert!(waiting(3, fresh, false, false).ready_to_commit(1));
        // Nothing waiting never makes a statement.
        assert!(!waiting(0, LINGER, true, false).ready_to_commit(0));
    }
}
