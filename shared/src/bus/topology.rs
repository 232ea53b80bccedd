//! Names and declarations of chime's exchanges and queues, under a configurable prefix.
//!
//! | name                  | type                     | purpose                                   |
//! |-----------------------|--------------------------|-------------------------------------------|
//! | `<p>.tasks`           | direct exchange          | routing key = worker group (`inline:<group>`) |
//! | `<p>.group.<group>`   | quorum queue             | one worker group's tasks that run as processes |
//! | `<p>.inline.<group>`  | quorum queue             | its tasks the worker runs itself (noop, http) |
//! | `<p>.events`          | topic exchange           | `task.<status>.<group>` lifecycle events  |
//! | `<p>.control`         | direct exchange          | kill and drain commands, key = worker id  |
//! | `<p>.worker.<id>`     | exclusive queue          | one worker's commands                     |
//! | `<p>.submit`          | direct exchange + queue  | ad-hoc tasks from any AMQP client         |
//! | `<p>.dead`            | fanout exchange + queue  | poison and undeliverable messages         |
//! | `<p>.dependencies`    | quorum queue on events   | ended and waiting tasks of jobs           |
//!
//! A worker group has two task queues because a worker has two kinds of slot: a process for a
//! shell or command-template task (few: `worker.concurrency`), and a place in its own event loop
//! for a noop or http task (many: `worker.inline_concurrency`). Each queue's prefetch matches
//! its slots, so neither kind waits unacked behind the other in a busy worker while another
//! worker has room. The outbox records a task message under its group; the relay picks the
//! queue by the message's kind ([`Topology::task_routing_key`]).
//!
//! A job's task's events reach `<p>.dependencies` by a second routing key,
//! `job.<status>.<group>`, that the relay sends in a `BCC` header
//! ([`Topology::dependency_routing_key`]).
//!
//! Every declaration is idempotent and made after each (re)connection.

use lapin::options::{
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, ExchangeKind};

use crate::model::kinds::INLINE_KINDS;

/// How many times RabbitMQ redelivers a task message before it dead-letters it: a message that
/// keeps killing its consumer must not loop forever.
pub const DELIVERY_LIMIT: i64 = 20;

/// The statuses whose events the dependency service acts on: ends, and tasks left waiting.
const DEPENDENCY_STATUSES: [&str; 4] = ["succeeded", "failed", "killed", "waiting"];

/// The AMQP names of one chime installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    prefix: String,
}

impl Topology {
    /// Names under `prefix` (validated by the settings).
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Direct exchange of task messages; routing key = worker group.
    pub fn tasks_exchange(&self) -> String {
        format!("{}.tasks", self.prefix)
    }

    /// The queue of one worker group's tasks that run as processes (shell, command templates).
    pub fn group_queue(&self, group: &str) -> String {
        format!("{}.group.{group}", self.prefix)
    }

    /// The queue of one worker group's tasks that a worker runs itself ([`INLINE_KINDS`]).
    pub fn inline_queue(&self, group: &str) -> String {
        format!("{}.inline.{group}", self.prefix)
    }

    /// Both task queues of one worker group: processes, then inline.
    pub fn task_queues(&self, group: &str) -> [String; 2] {
        [self.group_queue(group), self.inline_queue(group)]
    }

    /// The worker group whose task queue `queue` is, if it is one of this installation's.
    pub fn group_of_queue<'q>(&self, queue: &'q str) -> Option<&'q str> {
        let rest = queue
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix('.')?;
        rest.strip_prefix("group.")
            .or_else(|| rest.strip_prefix("inline."))
            .filter(|group| !group.is_empty())
    }

    /// The routing key of a task message for `group` whose JSON is `body`: the group, or
    /// `inline:<group>` for a kind in [`INLINE_KINDS`]. No group name holds a `:`, so the two
    /// never meet. A body that does not parse goes to the group's process queue, whose worker
    /// dead-letters it.
    pub fn task_routing_key<'g>(&self, group: &'g str, body: &str) -> std::borrow::Cow<'g, str> {
        #[derive(serde::Deserialize)]
        struct Kind<'a> {
            #[serde(borrow)]
            kind: std::borrow::Cow<'a, str>,
        }
        match serde_json::from_str::<Kind<'_>>(body) {
            Ok(Kind { kind }) if INLINE_KINDS.contains(&kind.as_ref()) => {
                format!("inline:{group}").into()
            }
            _ => group.into(),
        }
    }

    /// Topic exchange of task lifecycle events.
    pub fn events_exchange(&self) -> String {
        format!("{}.events", self.prefix)
    }

    /// Direct exchange of worker commands; routing key = worker id.
    pub fn control_exchange(&self) -> String {
        format!("{}.control", self.prefix)
    }

    /// Exchange and queue of ad-hoc submissions.
    pub fn submit_exchange(&self) -> String {
        format!("{}.submit", self.prefix)
    }

    /// The dependency service's queue of task events (ended and waiting tasks).
    pub fn dependencies_queue(&self) -> String {
        format!("{}.dependencies", self.prefix)
    }

    /// Fanout exchange and queue of dead letters.
    pub fn dead_exchange(&self) -> String {
        format!("{}.dead", self.prefix)
    }

    /// Declares the exchanges and the shared queues (submit, dead).
    pub async fn declare(&self, channel: &Channel) -> lapin::Result<()> {
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        for (name, kind) in [
            (self.tasks_exchange(), ExchangeKind::Direct),
            (self.events_exchange(), ExchangeKind::Topic),
            (self.control_exchange(), ExchangeKind::Direct),
            (self.submit_exchange(), ExchangeKind::Direct),
            (self.dead_exchange(), ExchangeKind::Fanout),
        ] {
            channel
                .exchange_declare(name.into(), kind, durable, FieldTable::default())
                .await?;
        }
        let dead = self.dead_exchange();
        channel
            .queue_declare(
                dead.clone().into(),
                QueueDeclareOptions::durable(),
                quorum(),
            )
            .await?;
        channel
            .queue_bind(
                dead.clone().into(),
                dead.into(),
                ShortString::from(""),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        let submit = self.submit_exchange();
        let mut submit_args = quorum();
        self.dead_lettered(&mut submit_args);
        channel
            .queue_declare(
                submit.clone().into(),
                QueueDeclareOptions::durable(),
                submit_args,
            )
            .await?;
        channel
            .queue_bind(
                submit.clone().into(),
                submit.clone().into(),
                submit.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        // Declared by every process, not only the dependency service, so that no event a
        // downstream job needs is dropped while no dependency service runs.
        let dependencies = self.dependencies_queue();
        let mut dependencies_args = quorum();
        self.dead_lettered(&mut dependencies_args);
        channel
            .queue_declare(
                dependencies.clone().into(),
                QueueDeclareOptions::durable(),
                dependencies_args,
            )
            .await?;
        for status in DEPENDENCY_STATUSES {
            channel
                .queue_bind(
                    dependencies.clone().into(),
                    self.events_exchange().into(),
                    format!("job.{status}.#").into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(())
    }

    /// Removes the bindings by which versions before 2026-11-25 sent every task's events to
    /// the dependency service's queue (`task.<status>.#`). Their relays send a job's events
    /// under those keys only, so the bindings are left in place by [`Topology::declare`] and
    /// removed only on request (`chime migrate --drop-old-bindings`), once no process of an
    /// earlier version runs: until then an installation upgraded from one still sends ad-hoc
    /// tasks' events there (and the dependency service drops them), as before.
    pub async fn drop_old_bindings(&self, channel: &Channel) -> lapin::Result<()> {
        for status in DEPENDENCY_STATUSES {
            channel
                .queue_unbind(
                    self.dependencies_queue().into(),
                    self.events_exchange().into(),
                    format!("task.{status}.#").into(),
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(())
    }

    /// The routing key under which an event also reaches the dependency service's queue, if it
    /// should: `job.<status>.<group>` for an event (`task.<status>.<group>`, `body` its JSON)
    /// of a job's task. An ad-hoc task has no downstream jobs, so its events go only to the
    /// events exchange's own subscribers and cost the dependency service nothing. The relay
    /// sends the key in a `BCC` header (RabbitMQ's sender-selected distribution), which the
    /// broker routes by and removes, so subscribers see the event as it was.
    pub fn dependency_routing_key(&self, routing_key: &str, body: &str) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Event {
            job_id: Option<i64>,
        }
        let rest = routing_key.strip_prefix("task.")?;
        serde_json::from_str::<Event>(body).ok()?.job_id?;
        Some(format!("job.{rest}"))
    }

    /// Declares a worker group's two task queues and binds them to the tasks exchange.
    pub async fn declare_group(&self, channel: &Channel, group: &str) -> lapin::Result<()> {
        for (queue, key) in [
            (self.group_queue(group), group.to_string()),
            (self.inline_queue(group), format!("inline:{group}")),
        ] {
            let mut args = quorum();
            self.dead_lettered(&mut args);
            channel
                .queue_declare(queue.clone().into(), QueueDeclareOptions::durable(), args)
                .await?;
            channel
                .queue_bind(
                    queue.into(),
                    self.tasks_exchange().into(),
                    key.into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(())
    }

    /// A worker's refusal-grace mark (see [`super::grace`]): a queue that holds nothing, exclusive
    /// to the worker's connection.
    pub fn grace_queue(&self, worker_id: &str) -> String {
        format!("{}.grace.{worker_id}", self.prefix)
    }

    /// A worker's own command queue (kill), bound to the control exchange by the worker's id.
    pub fn worker_queue(&self, worker_id: &str) -> String {
        format!("{}.worker.{worker_id}", self.prefix)
    }

    /// Declares a worker's command queue: exclusive to its connection and deleted with it (a
    /// command for a worker that is gone has no one to act on it; recovery handles its tasks).
    pub async fn declare_worker_queue(
        &self,
        channel: &Channel,
        worker_id: &str,
    ) -> lapin::Result<String> {
        let queue = self.worker_queue(worker_id);
        let options = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(queue.clone().into(), options, FieldTable::default())
            .await?;
        channel
            .queue_bind(
                queue.clone().into(),
                self.control_exchange().into(),
                worker_id.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(queue)
    }

    /// Deletes this installation's queues (the given groups', submit, dead) and exchanges: for
    /// throw-away installations (tests, benchmarks). Missing ones are ignored.
    pub async fn remove(&self, channel: &Channel, groups: &[String]) {
        let mut queues: Vec<String> = groups.iter().flat_map(|g| self.task_queues(g)).collect();
        queues.extend([
            self.submit_exchange(),
            self.dead_exchange(),
            self.dependencies_queue(),
        ]);
        for queue in queues {
            let _ = channel
                .queue_delete(queue.into(), QueueDeleteOptions::default())
                .await;
        }
        for exchange in [
            self.tasks_exchange(),
            self.events_exchange(),
            self.control_exchange(),
            self.submit_exchange(),
            self.dead_exchange(),
        ] {
            let _ = channel
                .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
                .await;
        }
    }

    fn dead_lettered(&self, args: &mut FieldTable) {
        args.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongLongInt(DELIVERY_LIMIT),
        );
        args.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(self.dead_exchange().into()),
        );
    }
}

fn quorum() -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    args
}
