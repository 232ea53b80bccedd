//! Where ad-hoc submissions from `<prefix>.submit` become tasks, a batch at a time.
//!
//! ```text
//!   the consumer collects up to `submit_batch` deliveries, or what came within
//!   `submit_batch_window_ms` of the first
//!     │
//!   each alone: decode, id (or message_id), validate ──bad──▶ dead-letter with the reason, ack
//!     │
//!   each alone: its submitter's right, its kind's group ──refused──▶ dead-letter, ack
//!     │
//!   the rest: every task and its message in one statement ──▶ ack them (one `multiple` ack)
//!     │       (submit_routed_taking)
//!     │  noop and http tasks of this worker's groups it has a free slot for are taken: written
//!     │  under it with no message, and started here as if delivered (delivery::run_taken)
//!     │
//!   the database is away ──▶ nothing acked; tried again until it commits (or, draining, requeued)
//! ```
//!
//! A submission with `reply_to` (RabbitMQ's direct reply-to, `amq.rabbitmq.reply-to`; a publish
//! to it needs write on the default exchange, `amq.default`) is answered (before it is acked, so
//! a worker that dies first
//! leaves it to be redelivered and answered again): `{"id", "created": true|false}` once it is
//! recorded (`false`: its id was recorded before, by an earlier copy), or `{"id", "refused":
//! "<the dead letter's reason>"}`, with the request's `correlation_id`.
//!
//! A submission's id (its `id`, or the AMQP `message_id`) makes a redelivered or re-published
//! submission one task, also when both copies land in one batch. Every worker consumes
//! submissions, so adding workers adds submission consumers.
//!
//! Taking a submission saves its task a trip through the broker (a publish, a delivery and an
//! ack), as a Celery worker runs the message it took. Only noop and http tasks are taken (inline
//! slots; see `Worker::slot_to_take`), and only into a slot no delivery of this worker waits for.
//! A taken task is `ready` under this worker until it starts; given back (the worker drains, or
//! the database refuses its start) its message is published then, and if the worker is gone
//! first, or has not started it 10 s after taking it, a scheduler publishes it
//! (`task_lifecycle::publish_unstarted_taken`).

use std::sync::Arc;
use std::time::Duration;

use chime_core::model::NewTask;
use chime_core::model::message::SubmitMessage;
use chime_core::store::{StoreError, task_lifecycle};
use lapin::Channel;
use lapin::message::Delivery;
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, warn};

use crate::Worker;
use crate::delivery::{ack, ack_up_to, dead_letter_and_ack, requeue};

/// How long a stopping worker waits for a batch being recorded.
const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// One submission of the batch, decoded and valid, with who published it.
struct Submission {
    delivery: Delivery,
    task: NewTask,
    user_id: Option<String>,
}

/// Whether every delivery of a channel before the current batch is settled (acked, dead-lettered
/// or given back): then the batch is acked with one `multiple` ack of its last delivery. A
/// delivery that could not be dead-lettered is given back (its queue's delivery limit ends the
/// loop); as with anything not acked in order, no later `multiple` ack of that channel may cover
/// it, so from then on its batches are acked one by one.
pub struct Settled(pub bool);

/// Records a batch of submissions and acks them: a bad or refused one is dead-lettered alone, the
/// rest go in with one commit. `settled` is the channel's ([`Settled`]); batches of one channel
/// are handled one after another.
pub async fn handle_batch(
    worker: &Arc<Worker>,
    channel: Channel,
    queue: &str,
    batch: Vec<Delivery>,
    settled: &mut Settled,
) {
    metrics::histogram!("chime_worker_submission_batch_size").record(batch.len() as f64);
    let mut pending = Vec::with_capacity(batch.len());
    for delivery in batch {
        match decode(&delivery) {
            Ok((task, user_id)) => pending.push(Submission {
                delivery,
                task,
                user_id,
            }),
            Err(reason) => {
                refuse(worker, &channel, queue, delivery, None, &reason, settled).await;
            }
        }
    }
    let mut delay = Duration::from_millis(100);
    while !pending.is_empty() {
        // A stopping worker gives a commit under way a while to finish, then leaves: what is
        // not acked comes back to the queue when its channel closes (an id keeps it one task).
        let drained = async {
            worker.draining.cancelled().await;
            tokio::time::sleep(DRAIN_WAIT).await;
        };
        let recorded = tokio::select! {
            biased;
            recorded = record(worker, &channel, queue, &mut pending, settled) => recorded,
            () = drained => {
                warn!("stopping with submissions not recorded; they go back to the queue");
                settled.0 = false;
                return;
            }
        };
        match recorded {
            Ok(()) => return,
            Err(error) => {
                // Held, not requeued, while the database is unreachable: a requeue would only
                // come straight back.
                warn!(%error, ?delay, submissions = pending.len(), "cannot record the submissions; waiting for the database");
            }
        }
        tokio::select! {
            _ = worker.draining.cancelled() => {
                for submission in &pending {
                    requeue(&submission.delivery).await;
                }
                return;
            }
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// A delivery's submission and who published it, or why it is poison.
fn decode(delivery: &Delivery) -> Result<(NewTask, Option<String>), String> {
    let mut task = SubmitMessage::decode(&delivery.data).map_err(|e| e.to_string())?;
    if task.id.is_none() {
        task.id = delivery
            .properties
            .message_id()
            .as_ref()
            .and_then(|id| uuid::Uuid::parse_str(id.as_str()).ok());
    }
    if let Err(error) = task.validate() {
        return Err(with_id_note(error.to_string(), &task));
    }
    let user_id = delivery
        .properties
        .user_id()
        .as_ref()
        .map(|u| u.as_str().to_string());
    Ok((task, user_id))
}

/// One try at recording `pending`: refusals are dead-lettered and leave `pending`; on success
/// every other submission is acked and `pending` is empty. An error (the database's) leaves the
/// ones still pending unacked, to be tried again.
async fn record(
    worker: &Arc<Worker>,
    channel: &Channel,
    queue: &str,
    pending: &mut Vec<Submission>,
    settled: &mut Settled,
) -> Result<(), StoreError> {
    // Who may submit is checked on every try: the answer is cached, and a database that was down
    // for the check is down for the write too.
    let mut admitted = Vec::with_capacity(pending.len());
    let mut unchecked = std::mem::take(pending).into_iter();
    while let Some(mut submission) = unchecked.next() {
        let user_id = submission.user_id.as_deref();
        match worker
            .submitters
            .admit(&worker.store, user_id, &mut submission.task)
            .await
        {
            Ok(()) => admitted.push(submission),
            Err(Ok(refusal)) => {
                let id = submission.task.id;
                refuse(
                    worker,
                    channel,
                    queue,
                    submission.delivery,
                    id,
                    &refusal,
                    settled,
                )
                .await;
            }
            Err(Err(error)) => {
                pending.append(&mut admitted);
                pending.push(submission);
                pending.extend(unchecked);
                return Err(error);
            }
        }
    }
    *pending = admitted;
    let tasks: Vec<&NewTask> = pending.iter().map(|s| &s.task).collect();
    let groups = task_lifecycle::route_submissions(&worker.store, &tasks).await?;
    let mut routed = Vec::with_capacity(pending.len());
    for (submission, group) in std::mem::take(pending).into_iter().zip(groups) {
        match group {
            Ok(group) => routed.push((submission, group)),
            Err(refusal) => {
                let reason = with_id_note(refusal.to_string(), &submission.task);
                let id = submission.task.id;
                refuse(
                    worker,
                    channel,
                    queue,
                    submission.delivery,
                    id,
                    &reason,
                    settled,
                )
                .await;
            }
        }
    }
    let rows: Vec<(&NewTask, &str)> = routed
        .iter()
        .map(|(s, group)| (&s.task, group.as_str()))
        .collect();
    // The slots of the tasks this worker runs itself; given back if the commit fails.
    let mut slots: Vec<Option<OwnedSemaphorePermit>> = rows
        .iter()
        .map(|&(task, group)| worker.slot_to_take(task, group))
        .collect();
    let taken: Vec<bool> = slots.iter().map(Option::is_some).collect();
    let recorded = task_lifecycle::submit_routed_taking(
        &worker.store,
        worker.topology(),
        &worker.identity,
        &rows,
        &taken,
    )
    .await;
    drop(rows);
    let (submitted, mut mine) = match recorded {
        Ok((submitted, mine)) => (submitted, mine.into_iter()),
        Err(error) if error.is_refused_data() => {
            // One of them holds what PostgreSQL refuses: each goes in alone, so only that one
            // is dead-lettered rather than the batch waiting for ever.
            warn!(%error, "a batch of submissions was refused; recording each alone");
            return record_each(worker, channel, queue, pending, routed, settled).await;
        }
        Err(error) => {
            pending.extend(routed.into_iter().map(|(submission, _)| submission));
            return Err(error);
        }
    };
    let created = submitted.iter().filter(|s| s.created).count();
    debug!(
        submissions = submitted.len(),
        created, "submissions recorded"
    );
    metrics::counter!("chime_worker_submissions_total").increment(submitted.len() as u64);
    // The taken tasks this commit made, in order, started before the acks (they are committed);
    // a taken one that existed already (its id given before) has its own message or runner,
    // and gives its slot back.
    for (told, slot) in submitted.iter().zip(&mut slots) {
        if let Some(slot) = slot.take()
            && told.created
            && let Some(message) = mine.next()
        {
            worker.run_taken(message, slot);
        }
    }
    // Answered before acked: a worker that dies between the two leaves the submission to be
    // delivered and answered again.
    for ((submission, _), told) in routed.iter().zip(&submitted) {
        answer_recorded(channel, &submission.delivery, told).await;
    }
    // Every delivery of the batch before its last is routed or settled by now, and so is every
    // earlier one of the channel, unless one could not be dead-lettered.
    let last = routed
        .iter()
        .map(|(s, _)| &s.delivery)
        .max_by_key(|d| d.delivery_tag);
    match last {
        Some(last) if settled.0 => ack_up_to(last).await,
        _ => {
            for (submission, _) in &routed {
                ack(&submission.delivery).await;
            }
        }
    }
    Ok(())
}

/// Records each routed submission in its own statement, dead-lettering those PostgreSQL refuses;
/// on an outage, those not yet recorded go back to `pending`.
async fn record_each(
    worker: &Worker,
    channel: &Channel,
    queue: &str,
    pending: &mut Vec<Submission>,
    routed: Vec<(Submission, String)>,
    settled: &mut Settled,
) -> Result<(), StoreError> {
    let mut items = routed.into_iter();
    while let Some((submission, group)) = items.next() {
        let one = [(&submission.task, group.as_str())];
        match task_lifecycle::submit_routed(&worker.store, worker.topology(), &one).await {
            Ok(told) => {
                metrics::counter!("chime_worker_submissions_total").increment(1);
                if let Some(told) = told.first() {
                    answer_recorded(channel, &submission.delivery, told).await;
                }
                ack(&submission.delivery).await;
            }
            Err(error) if error.is_refused_data() => {
                let id = submission.task.id;
                let reason = error.to_string();
                refuse(
                    worker,
                    channel,
                    queue,
                    submission.delivery,
                    id,
                    &reason,
                    settled,
                )
                .await;
            }
            Err(error) => {
                pending.push(submission);
                pending.extend(items.map(|(submission, _)| submission));
                return Err(error);
            }
        }
    }
    Ok(())
}

/// Dead-letters a refused submission (and acks it), answering its publisher first if it asked.
async fn refuse(
    worker: &Worker,
    channel: &Channel,
    queue: &str,
    delivery: Delivery,
    id: Option<uuid::Uuid>,
    reason: &str,
    settled: &mut Settled,
) {
    // An id the body did not give (or that did not decode) may be in the message_id.
    let id = id.map(|id| id.to_string()).or_else(|| {
        delivery
            .properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_string())
    });
    answer(
        channel,
        &delivery,
        serde_json::json!({"id": id, "refused": reason}),
    )
    .await;
    settled.0 &= dead_letter_and_ack(worker, channel, queue, delivery, reason).await;
}

/// The `reply_to` a submission may ask an answer at: RabbitMQ's direct reply-to only. Any other
/// queue name would let a publisher have workers write into queues it may not (a group's task
/// queue), and needs write permissions on them.
const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// Answers a recorded submission: its task's id, and whether this copy made it.
async fn answer_recorded(channel: &Channel, delivery: &Delivery, told: &task_lifecycle::Submitted) {
    let body = serde_json::json!({"id": told.id, "created": told.created});
    answer(channel, delivery, body).await;
}

/// Sends `body` to the submission's `reply_to`, if it has one and it is RabbitMQ's direct
/// reply-to; a reply that cannot be sent is logged (the publisher's wait ends in its own
/// timeout).
async fn answer(channel: &Channel, delivery: &Delivery, body: serde_json::Value) {
    let Some(reply_to) = delivery.properties.reply_to().as_ref() else {
        return;
    };
    if !reply_to.as_str().starts_with(DIRECT_REPLY_TO) {
        debug!(
            reply_to = reply_to.as_str(),
            "not answering a submission: reply_to is not amq.rabbitmq.reply-to"
        );
        return;
    }
    let correlation_id = delivery
        .properties
        .correlation_id()
        .as_ref()
        .map(|id| id.as_str());
    let bytes = body.to_string();
    if let Err(error) = chime_core::bus::publish::reply(
        channel,
        reply_to.as_str(),
        correlation_id,
        bytes.as_bytes(),
    )
    .await
    {
        debug!(%error, reply_to = reply_to.as_str(), "cannot answer a submission");
    }
}

/// Says, in a refusal's dead-letter reason, that a submission without an id makes a new task each
/// time it is published.
fn with_id_note(mut reason: String, task: &NewTask) -> String {
    if task.id.is_none() {
        reason.push_str(
            " (this submission had neither an `id` nor an AMQP message_id: set one so that a \
             redelivered or re-published submission makes one task)",
        );
    }
    reason
}
