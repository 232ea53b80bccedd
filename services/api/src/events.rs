//! `GET /api/v1/events`: live task changes, as server-sent events, for the dashboard.
//!
//! One poller per API process (running only while someone listens) compares, once a second, the
//! set of tasks not yet ended (read from the index of live statuses) and the tasks created since
//! its last look with what it saw before; each task that appeared or moved is sent once, as its
//! summary with the status it left:
//!
//! ```text
//! event: tasks
//! data: {"changes":[{"from":"running","new":false,"task":{…TaskSummary…}}, …]}
//! ```
//!
//! `from` is null for a task created since the last look (`new`) or one that was not live then
//! (a rerun).
//!
//! A task that was not live at either look but moved in between (a rerun that ended within the
//! second) is caught by the task events the store publishes on every end: the poller listens to
//! `<prefix>.events` on a queue of its own and looks at those tasks too. The database stays the
//! source: an event only says which task to read.
//!
//! More than [`MAX_CHANGES`] at once is sent as `event: resync` (reload what you show). Every
//! five seconds an `event: tick` lets pages refresh their small views (workers, schedulers). The
//! database is the source, so every API instance sends the same changes, whoever made them.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{Extension, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use chime_core::bus::Broker;
use chime_core::store::{Store, tasks};
use futures::{Stream, StreamExt};
use lapin::options::{BasicConsumeOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use serde_json::json;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};
use uuid::Uuid;

use crate::auth::Caller;
use crate::state::AppState;

/// How often the poller looks.
const POLL: Duration = Duration::from_secs(1);
/// The most changes sent one by one in a look; more is a resync.
pub const MAX_CHANGES: usize = 500;
/// Looks between ticks.
const TICK_EVERY: u32 = 5;

/// The process's task-change feed.
#[derive(Clone, Debug)]
pub struct TaskEvents {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    broker: Broker,
    sender: broadcast::Sender<(&'static str, Arc<str>)>,
    polling: AtomicBool,
}

impl TaskEvents {
    /// A feed of `store`'s task changes (nothing runs until someone subscribes).
    pub fn new(store: Store, broker: Broker) -> Self {
        let (sender, _) = broadcast::channel(64);
        Self {
            inner: Arc::new(Inner {
                store,
                broker,
                sender,
                polling: AtomicBool::new(false),
            }),
        }
    }

    /// Receives every change from now on; starts the poller if it is not running.
    fn subscribe(&self) -> broadcast::Receiver<(&'static str, Arc<str>)> {
        let receiver = self.inner.sender.subscribe();
        if !self.inner.polling.swap(true, Ordering::AcqRel) {
            let inner = self.inner.clone();
            tokio::spawn(poll(inner).instrument(info_span!("task_events")));
        }
        receiver
    }
}

/// Looks once a second while anyone listens, then stops (the next subscriber starts it again).
async fn poll(inner: Arc<Inner>) {
    let mut seen: Option<(HashMap<Uuid, String>, Option<Uuid>)> = None;
    let mut looks = 0u32;
    let mut failing = false;
    let ended: Ended = Arc::default();
    let stop = CancellationToken::new();
    let _stop_listening = stop.clone().drop_guard();
    let noted = ended.clone();
    tokio::spawn(listen_for_ends(
        inner.broker.clone(),
        move |task| {
            if let Ok(mut ended) = noted.lock() {
                if ended.ids.len() < MAX_CHANGES {
                    ended.ids.insert(task);
                } else {
                    ended.overflowed = true;
                }
            }
        },
        // The poller looks every second whatever the events say.
        |_| {},
        stop,
    ));
    let mut first = true;
    loop {
        // The first look is at once: it is the starting point new subscribers' pages are
        // compared with.
        if !first {
            tokio::time::sleep(POLL).await;
        }
        first = false;
        if inner.sender.receiver_count() == 0 {
            inner.polling.store(false, Ordering::Release);
            // Someone may have subscribed between the count and the store: take it back.
            if inner.sender.receiver_count() == 0 || inner.polling.swap(true, Ordering::AcqRel) {
                return;
            }
        }
        let (also, overflowed): (Vec<Uuid>, bool) = ended
            .lock()
            .map(|mut ended| {
                (
                    ended.ids.drain().collect(),
                    std::mem::take(&mut ended.overflowed),
                )
            })
            .unwrap_or_default();
        looks = looks.wrapping_add(1);
        if looks.is_multiple_of(TICK_EVERY) {
            let _ = inner.sender.send(("tick", Arc::from("{}")));
        }
        match look(&inner.store, seen.as_ref(), &also).await {
            Ok((now, message)) => {
                // Changes may have been missed while the store was away, or more ended than
                // were kept: pages reload what they show.
                let message = if (failing || overflowed) && seen.is_some() {
                    Some(("resync", Arc::from("{}")))
                } else {
                    message
                };
                failing = false;
                seen = Some(now);
                if let Some(message) = message {
                    metrics::counter!("chime_api_live_updates_total").increment(1);
                    let _ = inner.sender.send(message);
                }
            }
            Err(error) if failing => debug!(%error, "cannot read task changes; trying again"),
            Err(error) => {
                failing = true;
                warn!(%error, "cannot read task changes; trying again every second");
            }
        }
    }
}

type Seen = (HashMap<Uuid, String>, Option<Uuid>);

/// Tasks the events said moved since the last look (at most [`MAX_CHANGES`]; past that, a
/// resync).
type Ended = Arc<std::sync::Mutex<EndedTasks>>;

#[derive(Debug, Default)]
struct EndedTasks {
    ids: HashSet<Uuid>,
    overflowed: bool,
}

/// Hands `moved` the task id of each task event published to `<prefix>.events`, on a queue that
/// lives as long as this listener, until `stop`; reconnects when the broker comes back.
/// `listening` hears when the queue is bound (true: every event from then on arrives) and when
/// its connection is lost (false).
pub(crate) async fn listen_for_ends(
    broker: Broker,
    moved: impl Fn(Uuid),
    listening: impl Fn(bool),
    stop: CancellationToken,
) {
    while let Some(conn) = broker.connection(&stop).await {
        let consumer = async {
            let channel = conn.create_channel().await?;
            // Named under the prefix (not server-named `amq.gen-…`): a broker user whose
            // permissions cover chime's prefix only may declare it.
            let name = format!(
                "{}.events.{}",
                broker.topology().prefix(),
                uuid::Uuid::now_v7().simple()
            );
            let queue = channel
                .queue_declare(
                    name.into(),
                    QueueDeclareOptions {
                        exclusive: true,
                        auto_delete: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await?;
            channel
                .queue_bind(
                    queue.name().clone(),
                    broker.topology().events_exchange().into(),
                    "task.#".into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
            channel
                .basic_consume(
                    queue.name().clone(),
                    "dashboard".into(),
                    BasicConsumeOptions {
                        no_ack: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
        };
        let mut consumer = tokio::select! {
            _ = stop.cancelled() => return,
            consumer = consumer => match consumer {
                Ok(consumer) => {
                    listening(true);
                    consumer
                }
                Err(error) => {
                    debug!(%error, "cannot listen to task events; polling only");
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                    }
                }
            },
        };
        loop {
            let delivery = tokio::select! {
                _ = stop.cancelled() => return,
                delivery = consumer.next() => delivery,
            };
            let Some(Ok(delivery)) = delivery else {
                listening(false);
                break;
            };
            let task = serde_json::from_slice::<serde_json::Value>(&delivery.data)
                .ok()
                .and_then(|event| event.get("task_id")?.as_str()?.parse::<Uuid>().ok());
            if let Some(task) = task {
                moved(task);
            }
        }
    }
}

/// One look: what is live now and the newest id, and the message for what changed since `before`
/// (None the first time, or when nothing changed); `also` are tasks the events said moved.
async fn look(
    store: &Store,
    before: Option<&Seen>,
    also: &[Uuid],
) -> Result<(Seen, Option<(&'static str, Arc<str>)>), chime_core::store::StoreError> {
    let live: HashMap<Uuid, String> = tasks::live_statuses(store).await?.into_iter().collect();
    let Some((was_live, newest_before)) = before else {
        let newest = tasks::newest_id(store).await?;
        return Ok(((live, newest), None));
    };
    let created = tasks::created_after(store, *newest_before, MAX_CHANGES as i64 + 1).await?;
    let newest = created.last().map(|(id, _)| *id).or(*newest_before);
    let mut from: HashMap<Uuid, Option<String>> = HashMap::new();
    let created_ids: HashSet<Uuid> = created.iter().map(|(id, _)| *id).collect();
    for id in &created_ids {
        from.insert(*id, None);
    }
    for (id, status) in &live {
        match was_live.get(id) {
            Some(old) if old == status => {}
            Some(old) => {
                from.entry(*id).or_insert_with(|| Some(old.clone()));
            }
            // Live now, not before, not new: a rerun of an ended task.
            None => {
                from.entry(*id).or_insert(None);
            }
        }
    }
    for (id, old) in was_live {
        if !live.contains_key(id) {
            from.entry(*id).or_insert_with(|| Some(old.clone()));
        }
    }
    for id in also {
        from.entry(*id).or_insert(None);
    }
    let seen = (live, newest);
    if from.is_empty() {
        return Ok((seen, None));
    }
    if from.len() > MAX_CHANGES {
        return Ok((seen, Some(("resync", Arc::from("{}")))));
    }
    let ids: Vec<Uuid> = from.keys().copied().collect();
    let summaries = tasks::summaries(store, &ids).await?;
    let mut reported = HashSet::new();
    let changes: Vec<serde_json::Value> = summaries
        .into_iter()
        .filter(|task| reported.insert(task.id))
        .map(|task| {
            let old = from.get(&task.id).cloned().flatten();
            let new = created_ids.contains(&task.id);
            json!({ "from": old, "new": new, "task": task })
        })
        .collect();
    let data = json!({ "changes": changes }).to_string();
    Ok((seen, Some(("tasks", Arc::from(data)))))
}

/// Streams task changes as server-sent events until the client goes away.
#[utoipa::path(
    get, path = "/api/v1/events", tag = "tasks",
    responses((status = 200, description = "text/event-stream of `tasks`, `resync` and `tick` events"),
              (status = 429, description = "the token, or the API, holds its most streams", body = crate::error::ErrorBody))
)]
pub async fn task_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, crate::limits::StreamRefused> {
    // Held by the stream for its life: a feed is bounded per token and in all.
    let slot = state.streams.take(&caller.0.name)?;
    let receiver = state.events.subscribe();
    let stream = futures::stream::unfold((receiver, slot), |(mut receiver, slot)| async move {
        let event = match receiver.recv().await {
            Ok((name, data)) => Event::default().event(name).data(&*data),
            // Too slow a reader missed some: tell it to reload.
            Err(broadcast::error::RecvError::Lagged(_)) => {
                Event::default().event("resync").data("{}")
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((event, (receiver, slot)))
    })
    .map(Ok)
    .take_until(state.shutdown.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
