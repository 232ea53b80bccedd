//! What happens to one task message, from its worker group's queue (process or inline) to its ack (submissions:
//! [`crate::submissions`]).
//!
//! ```text
//!   decode ──poison──▶ dead-letter with the reason, ack
//!     │
//!   its group is the queue's ──no──▶ dead-letter (a worker runs only the groups it consumes)
//!     │
//!   nothing to run (a noop without a sleep)? ──▶ complete_attempt (ready → succeeded, checked
//!     │                                          as a start is, in one commit) ──▶ ack
//!   start_attempt (ready → running for this exact attempt, if the row records what the message
//!     │            says) ──nothing moved──▶ the row differs: dead-letter, attempt untouched
//!     │                                     still ready (refused: the lease): requeue
//!     │                                     duplicate, stale or killed: ack, drop (a redelivery
//!     │                                     whose worker disconnected recovers that worker's
//!     │                                     attempt first)
//!     │  returns the attempt as the task's row records it
//!   execute what the row records (timeout, process group)
//!     │
//!   finish_attempt (outcome + event in one commit) ──▶ ack
//! ```
//!
//! The ack comes only after the outcome is committed, so prefetch bounds what a worker holds and a
//! crash before the commit redelivers the message. An ack that returns `Ok(false)` (its channel was
//! lost) is harmless: the redelivered message finds its attempt no longer `ready` and is dropped.
//!
//! A task the worker took from the submission it recorded ([`run_taken`]) goes the same way from
//! its slot on, with nothing to ack: where a delivery would be requeued or dead-lettered, its
//! message is published from its row (the task is no longer taken).

use std::time::Duration;

use chime_core::bus::dead_letter;
use chime_core::model::message::decode;
use chime_core::model::{TaskMessage, TaskStatus, runs_instantly};
use chime_core::store::attempt_output;
use chime_core::store::task_lifecycle::{self, AttemptEnd, FinishedAttempt};
use lapin::Channel;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use tokio::sync::OwnedSemaphorePermit;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::executor::Attempt;
use crate::transitions::Pace;
use crate::{Phase, Worker};

/// Handles a task message from a worker-group queue.
pub async fn handle_task(worker: &Worker, channel: Channel, queue: &str, delivery: Delivery) {
    let message = match decode::<TaskMessage>(&delivery.data) {
        Ok(message) => message,
        Err(error) => {
            return reject_poison(worker, &channel, queue, delivery, &error.to_string()).await;
        }
    };
    if worker.topology().group_of_queue(queue) != Some(message.group.as_str()) {
        // Forged or misrouted: this queue's tasks are another group's, and the task's row is
        // not touched, so a forgery spends no attempt.
        let reason = format!(
            "a task message for worker group {:?} came from queue {queue}",
            message.group
        );
        metrics::counter!("chime_worker_mismatched_messages_total").increment(1);
        return reject_poison(worker, &channel, queue, delivery, &reason).await;
    }
    let origin = Origin::Delivered {
        channel: &channel,
        queue,
        delivery: Box::new(delivery),
    };
    run(worker, message, origin, None).await
}

/// Runs a task this worker took from the submission it recorded ([`crate::submissions`]), in the
/// slot it kept for it: as a delivered message is run, but with no message to settle.
pub async fn run_taken(worker: &Worker, message: TaskMessage, slot: OwnedSemaphorePermit) {
    run(worker, message, Origin::Taken, Some(slot)).await
}

/// Where an attempt to run came from, and so how it is settled once this worker is done with it.
enum Origin<'a> {
    /// A message delivered from a worker-group queue: acked, given back or dead-lettered.
    Delivered {
        channel: &'a Channel,
        queue: &'a str,
        delivery: Box<Delivery>,
    },
    /// A task this worker took from the submission it recorded: no message of it exists, so
    /// giving it back publishes one, and there is nothing to ack.
    Taken,
}

impl Origin<'_> {
    /// Whether its transitions hold up a delivery's ack (and so prefetch) until they commit.
    fn pace(&self) -> Pace {
        match self {
            Origin::Delivered { .. } => Pace::Prompt,
            Origin::Taken => Pace::Unhurried,
        }
    }

    /// Whether the broker delivered it before (its last consumer's channel closed).
    fn redelivered(&self) -> bool {
        matches!(self, Origin::Delivered { delivery, .. } if delivery.redelivered)
    }

    /// Done with: its outcome is committed, or it had nothing to do here.
    async fn ack(self) {
        if let Origin::Delivered { delivery, .. } = self {
            ack(&delivery).await;
        }
    }

    /// Not started here: for another worker, or for this one later.
    async fn give_back(self, worker: &Worker, message: &TaskMessage) {
        match self {
            Origin::Delivered { delivery, .. } => requeue(&delivery).await,
            Origin::Taken => {
                match task_lifecycle::republish_ready_attempt(
                    &worker.store,
                    worker.topology(),
                    message.task_id,
                    message.attempt,
                )
                .await
                {
                    Ok(_) => worker.store.outbox_written(),
                    // Still taken by this worker: a scheduler publishes it once the worker is
                    // gone, or within seconds (`publish_unstarted_taken`).
                    Err(error) => warn!(%error, "cannot give a taken task back"),
                }
            }
        }
    }

    /// Poison or forged: dead-lettered with the reason. A taken task has no message to
    /// dead-letter, and its row is the truth: its message is published from the row, if it is
    /// still ready at this attempt.
    async fn reject(self, worker: &Worker, message: &TaskMessage, reason: &str) {
        match self {
            Origin::Delivered {
                channel,
                queue,
                delivery,
            } => reject_poison(worker, channel, queue, *delivery, reason).await,
            Origin::Taken => {
                warn!(%reason, "a taken task did not start; publishing it from its row");
                Origin::Taken.give_back(worker, message).await;
            }
        }
    }
}

/// Runs one attempt, from its slot (`slot`, or one waited for) to its settling.
async fn run(
    worker: &Worker,
    message: TaskMessage,
    origin: Origin<'_>,
    slot: Option<OwnedSemaphorePermit>,
) {
    let span = info_span!("attempt", task_id = %message.task_id, attempt = message.attempt, kind = %message.kind);
    async {
        let _permit = match slot {
            Some(slot) => slot,
            None => match worker.permit(&message.kind).await {
                Some(permit) => permit,
                // Shutting down before it started: give it back to the queue.
                None => return origin.give_back(worker, &message).await,
            },
        };
        // Started only under the lease (the database refuses a start without it, too).
        tokio::select! {
            biased;
            _ = worker.draining.cancelled() => return origin.give_back(worker, &message).await,
            _ = worker.lease.wait_held() => {}
        }
        let key = (message.task_id, message.attempt);
        let Some((kill, abandon, lease_mark)) = worker.hold(key) else {
            debug!(
                "this worker holds the attempt already (a duplicate delivery, or one it is \
                 releasing as never run); dropping"
            );
            metrics::counter!("chime_worker_duplicates_total").increment(1);
            origin.ack().await;
            return;
        };
        if runs_instantly(&message.kind, &message.spec) {
            return complete(worker, origin, message, lease_mark).await;
        }
        let recorded = match until_answered(worker, lease_mark, || {
            worker
                .transitions
                .start_attempt(message.clone(), origin.pace())
        })
        .await
        {
            Some(Some(recorded)) => recorded,
            Some(None) => {
                let shadowed = worker.let_go(key);
                if origin.redelivered() {
                    recover_if_orphaned(worker, &message).await;
                }
                return not_started(worker, origin, &message, shadowed).await;
            }
            None => {
                // Draining while the database is unreachable, or the lease ran out while it was
                // asked: the message goes back. Had the start committed unheard, the heartbeat
                // finds the attempt running here but not held, and releases it.
                worker.let_go(key);
                return origin.give_back(worker, &message).await;
            }
        };
        if let Some(difference) = differs(&message, &recorded) {
            // Forged, or stale: what runs is what the database recorded, and from its own
            // message, routed to its own group. This attempt never ran; the next one will.
            let reason = format!("the message does not match its task's row ({difference})");
            warn!(%reason, "dead-lettering a task message and releasing its attempt");
            metrics::counter!("chime_worker_mismatched_messages_total").increment(1);
            let released = task_lifecycle::release_attempts(
                &worker.store,
                worker.topology(),
                &worker.identity,
                &[key],
                task_lifecycle::Release::NeverRan,
            )
            .await;
            worker.let_go(key);
            if let Err(error) = released {
                // Still running under this worker: its heartbeat finds it unheld and releases it.
                warn!(%error, "cannot release the attempt now");
            }
            return origin.reject(worker, &message, &reason).await;
        }
        worker.set_phase(key, Phase::Running);
        metrics::gauge!("chime_worker_running").increment(1.0);
        let started_at = std::time::Instant::now();
        let attempt = Attempt::new(
            recorded,
            abandon,
            kill,
            worker.executors.output_tail(),
            (worker.lease.clone(), lease_mark),
        );
        // Aborted when this attempt's handling ends, however it ends.
        let follower = AbortOnDrop(tokio::spawn(follow_output(
            worker.store.clone(),
            attempt.message.task_id,
            attempt.message.attempt,
            attempt.output.clone(),
        )));
        let end = worker.executors.execute(&attempt).await;
        drop(follower);
        worker.set_phase(key, Phase::Ending);
        metrics::gauge!("chime_worker_running").decrement(1.0);
        let labels = [
            ("worker_group", attempt.message.group.clone()),
            ("kind", attempt.message.kind.clone()),
        ];
        metrics::histogram!("chime_attempt_duration_seconds", &labels).record(started_at.elapsed());
        let outcome = end.outcome().as_str();
        let finished = FinishedAttempt {
            task_id: attempt.message.task_id,
            attempt: attempt.message.attempt,
            end,
        };
        let recorded = record_end(worker, finished, origin.pace()).await;
        worker.let_go(key);
        if let Some(moved_to) = recorded {
            metrics::counter!("chime_worker_attempts_total", "outcome" => outcome).increment(1);
            match moved_to {
                Some(status) if status.is_terminal() => {
                    let mut labels = labels.to_vec();
                    labels.push(("outcome", status.as_str().to_string()));
                    metrics::counter!("chime_tasks_finished_total", &labels).increment(1);
                }
                Some(TaskStatus::Retrying) => {
                    let mut labels = labels.to_vec();
                    labels.push(("reason", outcome.to_string()));
                    metrics::counter!("chime_task_retries_total", &labels).increment(1);
                }
                _ => {}
            }
            origin.ack().await;
        }
    }
    .instrument(span)
    .await
}

/// A task aborted when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often a running attempt's output is written for those who follow it.
const OUTPUT_FOLLOW_INTERVAL: Duration = Duration::from_secs(1);

/// Writes a running attempt's output to its row whenever it changed, about once a second, until
/// aborted at the attempt's end (whose commit writes the final output). Best effort: a write
/// that fails is retried with the next change, and one that lands after the end changes nothing.
async fn follow_output(
    store: chime_core::store::Store,
    task_id: uuid::Uuid,
    attempt: i32,
    output: crate::executor::output::OutputTail,
) {
    let mut written = 0;
    let mut tick = tokio::time::interval(OUTPUT_FOLLOW_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let writes = output.writes();
        if writes == written {
            continue;
        }
        let (text, bytes) = output.snapshot();
        match attempt_output::record_running(&store, task_id, attempt, &text, bytes).await {
            Ok(()) => written = writes,
            Err(error) => debug!(%error, "cannot record the running output"),
        }
    }
}

/// A message whose attempt the database would not start: a message for a task that does not
/// exist, or that differs from the attempt its task's row records, is dead-lettered (forged, or
/// from another installation) and the row is left as it was; one for an older attempt, or for a
/// task that has ended or runs elsewhere, is dropped with the reason logged. When a forged
/// message made this worker drop another delivery of the same attempt (`shadowed`: it may have
/// been the genuine one), the attempt's message is published again from its row.
async fn not_started(worker: &Worker, origin: Origin<'_>, message: &TaskMessage, shadowed: bool) {
    let attempt = message.attempt;
    match task_lifecycle::recorded_attempt(&worker.store, message.task_id).await {
        Ok(None) => {
            let reason = format!("no task {} exists", message.task_id);
            return origin.reject(worker, message, &reason).await;
        }
        Ok(Some((status, recorded))) if recorded.attempt != attempt => {
            metrics::counter!("chime_worker_duplicates_total").increment(1);
            let current = recorded.attempt;
            warn!(%status, current, "dropping a message for a stale attempt: the task is at attempt {current}");
        }
        Ok(Some((status, recorded))) => match differs(message, &recorded) {
            Some(difference) => {
                let reason = format!("the message does not match its task's row ({difference})");
                warn!(%reason, %status, "dead-lettering a task message; its attempt is untouched");
                metrics::counter!("chime_worker_mismatched_messages_total").increment(1);
                if shadowed
                    && let Err(error) = task_lifecycle::republish_ready_attempt(
                        &worker.store,
                        worker.topology(),
                        message.task_id,
                        attempt,
                    )
                    .await
                {
                    // The scheduler's republish backstop finds the attempt ready and unstarted.
                    warn!(%error, "cannot publish the attempt's message again");
                }
                return origin.reject(worker, message, &reason).await;
            }
            None if status == TaskStatus::Ready => {
                // Still ready at this attempt: the database refused this worker the start (its
                // lease ran out meanwhile, or it was declared dead and has not renewed yet). Back
                // to the queue, after a pause that keeps a worker in that state from spending the
                // message's deliveries.
                info!("the start was refused (the worker's lease is not held); requeueing");
                tokio::select! {
                    _ = worker.draining.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                return origin.give_back(worker, message).await;
            }
            None => {
                metrics::counter!("chime_worker_duplicates_total").increment(1);
                debug!(%status, "dropping a duplicate message: the attempt has started or ended already");
            }
        },
        Err(error) => debug!(%error, "dropping a message whose attempt was not ready"),
    }
    origin.ack().await;
}

/// Which field of a task message differs from the attempt its task's row records, if any. Times
/// are compared at PostgreSQL's precision (microseconds).
fn differs(message: &TaskMessage, recorded: &TaskMessage) -> Option<&'static str> {
    let micros = |t: Option<jiff::Timestamp>| t.map(|t| t.as_microsecond());
    if message.kind != recorded.kind {
        Some("kind")
    } else if message.group != recorded.group {
        Some("group")
    } else if message.spec != recorded.spec {
        Some("spec")
    } else if message.data != recorded.data {
        Some("data")
    } else if micros(message.data_time) != micros(recorded.data_time) {
        Some("data_time")
    } else if message.timeout_ms != recorded.timeout_ms {
        Some("timeout_ms")
    } else if message.execute_user != recorded.execute_user {
        Some("execute_user")
    } else {
        None
    }
}

/// An attempt with nothing to run, held by this worker: completed (`ready → succeeded`) in one
/// commit, then acked; a message whose attempt was not ready goes where a start's would. A
/// completion that committed while this worker saw an error is, asked again, no longer ready:
/// the task is right and the delivery acked, and the counters count a duplicate.
async fn complete(worker: &Worker, origin: Origin<'_>, message: TaskMessage, lease_mark: u64) {
    let key = (message.task_id, message.attempt);
    let completed = until_answered(worker, lease_mark, || {
        worker
            .transitions
            .complete_attempt(message.clone(), origin.pace())
    })
    .await;
    let shadowed = worker.let_go(key);
    match completed {
        Some(Some(status)) => {
            metrics::counter!("chime_worker_attempts_total", "outcome" => "succeeded").increment(1);
            let labels = [("worker_group", message.group), ("kind", message.kind)];
            // It ran for no time, and counts as an attempt that did.
            metrics::histogram!("chime_attempt_duration_seconds", &labels).record(0.0);
            let mut labels = labels.to_vec();
            labels.push(("outcome", status.as_str().to_string()));
            metrics::counter!("chime_tasks_finished_total", &labels).increment(1);
            origin.ack().await;
        }
        Some(None) => {
            if origin.redelivered() {
                recover_if_orphaned(worker, &message).await;
            }
            not_started(worker, origin, &message, shadowed).await;
        }
        // Draining while the database is unreachable, or the lease ran out meanwhile: the
        // message goes back (a completion that committed unheard makes it a duplicate there).
        None => origin.give_back(worker, &message).await,
    }
}

/// Asks for a start or a completion until the database answers: while it is unreachable the
/// delivery is held (not requeued), so the worker's prefetch fills and the broker stops
/// delivering — no requeue loop spends the queue's delivery limit. The answer is what the
/// transition gave back, or None if the attempt was not ready; None outside if the worker began
/// draining first, or if the lease counted at `lease_mark` (when the worker took hold of the
/// attempt) ran out meanwhile: a start asked for after that would commit under a later lease
/// what was taken under an earlier one, and be let go unrun. Giving it back spends one of the
/// message's deliveries, once per lapse. (A start that committed unheard before is found
/// running here but not held by the heartbeat, and released as never run.)
async fn until_answered<V, F, Fut>(worker: &Worker, lease_mark: u64, ask: F) -> Option<Option<V>>
where
    F: Fn() -> Fut,
    Fut: Future<Output = crate::transitions::Answer<V>>,
{
    let mut delay = Duration::from_millis(100);
    loop {
        if worker.lease.lost_since(lease_mark) {
            info!("the lease ran out while the database was asked; giving the message back");
            metrics::counter!("chime_worker_lapsed_starts_total").increment(1);
            return None;
        }
        match ask().await {
            Ok(started) => return Some(started),
            Err(error) => {
                warn!(%error, ?delay, "cannot start or complete the attempt; waiting for the database");
                metrics::counter!("chime_worker_database_waits_total").increment(1);
            }
        }
        tokio::select! {
            _ = worker.draining.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// A redelivered message whose attempt is `running` under another worker: RabbitMQ redelivers
/// when that worker's channel closed. If the worker is gone (declared offline) the attempt is
/// recovered now: re-run with `requests_recovery`, else the failed policy. A worker
/// whose connection merely blipped still heartbeats and keeps its attempt (a closed broker
/// connection alone does not prove the process died), so the scheduler's periodic recovery
/// handles the rest.
async fn recover_if_orphaned(worker: &Worker, message: &TaskMessage) {
    // The recovery statement itself checks that the attempt runs and its worker is gone.
    let scope = task_lifecycle::LostScope::Attempt {
        task_id: message.task_id,
        attempt: message.attempt,
    };
    // Only an attempt of a worker already declared gone (this pool's sessions carry no restart
    // guard, so declaring is the scheduler's recovery's alone).
    let recovered = async {
        let mut conn = worker.store.pool().acquire().await.map_err(|source| {
            chime_core::store::StoreError::Database {
                context: "acquiring a connection",
                source,
            }
        })?;
        task_lifecycle::recover_lost_attempts(&mut conn, worker.topology(), scope, None).await
    };
    match recovered.await {
        Ok(0) => {}
        Ok(_) => {
            // Its re-run message is in the outbox: this worker's relay publishes it now.
            worker.store.outbox_written();
            info!("recovered the attempt of a worker that is gone");
            metrics::counter!("chime_worker_attempts_recovered_total").increment(1);
        }
        Err(error) => warn!(%error, "cannot recover the attempt; the scheduler's recovery will"),
    }
}

/// Commits the attempt's end, retrying while the database is away. Some(the status the task moved
/// to, if this worker's end moved it) once there is nothing more to do; None if the worker stops
/// first (the message is then left unacked).
async fn record_end(
    worker: &Worker,
    finished: FinishedAttempt,
    pace: Pace,
) -> Option<Option<TaskStatus>> {
    let mut delay = Duration::from_millis(100);
    loop {
        let released = match &finished.end {
            // Cut short by this worker's shutdown or its lease: a lost attempt, as if the worker
            // had died.
            AttemptEnd::Abandoned(_) => Some(task_lifecycle::Release::Interrupted),
            // Let go before it started: the task goes on to its next attempt.
            AttemptEnd::NeverRan => Some(task_lifecycle::Release::NeverRan),
            _ => None,
        };
        let recorded = match released {
            Some(why) => task_lifecycle::release_attempts(
                &worker.store,
                worker.topology(),
                &worker.identity,
                &[(finished.task_id, finished.attempt)],
                why,
            )
            .await
            .map(|moved| (moved > 0).then_some(None))
            .map_err(std::sync::Arc::new),
            None => worker
                .transitions
                .finish_attempt(finished.clone(), pace)
                .await
                .map(|moved| moved.map(Some)),
        };
        match recorded {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {
                debug!("the attempt is no longer ours (killed or recovered); dropping");
                return Some(None);
            }
            Err(error) => {
                warn!(%error, ?delay, "cannot record the attempt's end; retrying");
                if worker.hard_stop.is_cancelled() {
                    // Leave it unacked: the message comes back and recovery decides.
                    return None;
                }
                tokio::select! {
                    _ = worker.hard_stop.cancelled() => return None,
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

pub(crate) async fn reject_poison(
    worker: &Worker,
    channel: &Channel,
    queue: &str,
    delivery: Delivery,
    reason: &str,
) {
    dead_letter_and_ack(worker, channel, queue, delivery, reason).await;
}

/// [`reject_poison`], saying whether the delivery was settled: false when it could not be
/// dead-lettered and stays unacked.
pub(crate) async fn dead_letter_and_ack(
    worker: &Worker,
    channel: &Channel,
    queue: &str,
    delivery: Delivery,
    reason: &str,
) -> bool {
    warn!(%queue, %reason, "dead-lettering a poison message");
    metrics::counter!("chime_worker_poison_total").increment(1);
    match dead_letter(channel, worker.topology(), queue, &delivery.data, reason).await {
        Ok(()) => {
            ack(&delivery).await;
            true
        }
        Err(error) => {
            // Not safely dead-lettered: given back, not held unacked for the channel's life; the
            // queue's delivery limit dead-letters it in the end.
            warn!(%error, "dead-lettering failed; the message goes back to its queue");
            requeue(&delivery).await;
            false
        }
    }
}

/// Gives the delivery back to its queue (it was not started).
pub(crate) async fn requeue(delivery: &Delivery) {
    let requeue = BasicNackOptions {
        requeue: true,
        ..BasicNackOptions::default()
    };
    if let Err(error) = delivery.acker.nack(requeue).await {
        debug!(%error, "nack failed; the message comes back when the channel closes");
    }
}

pub(crate) async fn ack(delivery: &Delivery) {
    ack_with(delivery, BasicAckOptions::default()).await;
}

/// Acks `delivery` and every earlier delivery of its channel not yet settled (`multiple`): one
/// frame for a batch, where the caller knows no earlier delivery must stay unacked.
pub(crate) async fn ack_up_to(delivery: &Delivery) {
    ack_with(delivery, BasicAckOptions { multiple: true }).await;
}

async fn ack_with(delivery: &Delivery, options: BasicAckOptions) {
    match delivery.acker.ack(options).await {
        Ok(true) => {}
        Ok(false) => {
            debug!("ack not sent (channel gone); the message will come again and be dropped")
        }
        Err(error) => debug!(%error, "ack failed; the message will come again and be dropped"),
    }
}
