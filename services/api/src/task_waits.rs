//! `POST /api/v1/tasks/wait`: the ends of the tasks a client waits for, as server-sent events
//! (the Python client's `Task.wait` and `wait_all`).
//!
//! ```text
//! event: ended      data: {…TaskView…}            one per task, once it has ended
//! event: missing    data: {"id": "…"}              an id no task has
//! event: done       data: {}                       every task asked for has ended
//! ```
//!
//! A task's end is seen when its event (`<prefix>.events`, published by the outbox after the
//! end commits) reaches this process: the task is read from the store then, so what is sent is
//! what committed. One listener per API process serves every waiter (running only while someone
//! waits). Events are hints: the tasks still waited for are also read every
//! [`RECHECK`], so a broker away, or an event missed, delays an answer and never loses it; a
//! client that reconnects asks again and gets the ends that came meanwhile at once.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{Extension, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chime_core::bus::Broker;
use chime_core::store::{Store, tasks};
use futures::Stream;
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiJson};
use crate::state::AppState;

/// How often the tasks still waited for are read, events or not.
const RECHECK: Duration = Duration::from_secs(2);
/// How long the listener outlives its last waiter: a client waiting for one task after another
/// finds it bound already.
const IDLE: Duration = Duration::from_secs(30);
/// How long a new wait waits for the listener to be bound before its first read (an end
/// committed after that read is then sure to be heard; past this, the rechecks cover it).
const BIND_WAIT: Duration = Duration::from_secs(2);
/// The most tasks one stream waits for.
pub const MAX_WAITED: usize = 10_000;

/// The tasks to wait for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    /// Task ids (at most 10,000).
    pub ids: Vec<Uuid>,
}

/// The process's feed of task ids whose events arrived.
#[derive(Clone, Debug)]
pub struct TaskEnds {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    broker: Broker,
    sender: broadcast::Sender<Uuid>,
    listening: AtomicBool,
    /// Whether the running listener's queue is bound now: one channel per run, so that a run
    /// that is stopping cannot say "unbound" over the one that replaced it.
    bound: std::sync::Mutex<watch::Sender<bool>>,
}

impl TaskEnds {
    /// A feed of `broker`'s task events (nothing listens until someone waits).
    pub fn new(broker: Broker) -> Self {
        let (sender, _) = broadcast::channel(4096);
        Self {
            inner: Arc::new(Inner {
                broker,
                sender,
                listening: AtomicBool::new(false),
                bound: std::sync::Mutex::new(watch::Sender::new(false)),
            }),
        }
    }

    /// Receives every task id whose event arrives from now on, and whether the listener is
    /// bound; starts the listener if needed.
    fn subscribe(&self) -> (broadcast::Receiver<Uuid>, watch::Receiver<bool>) {
        let receiver = self.inner.sender.subscribe();
        if !self.inner.listening.swap(true, Ordering::AcqRel) {
            let run = watch::Sender::new(false);
            if let Ok(mut bound) = self.inner.bound.lock() {
                *bound = run.clone();
            }
            let inner = self.inner.clone();
            tokio::spawn(listen(inner, run).instrument(info_span!("task_waits")));
        }
        let bound = match self.inner.bound.lock() {
            Ok(bound) => bound.subscribe(),
            // Never poisoned (nothing panics holding it); if it were, the rechecks cover.
            Err(_) => watch::Sender::new(false).subscribe(),
        };
        (receiver, bound)
    }
}

/// Listens while anyone waits, and for [`IDLE`] after the last one, then stops.
async fn listen(inner: Arc<Inner>, bound: watch::Sender<bool>) {
    let stop = CancellationToken::new();
    let sender = inner.sender.clone();
    let listener = tokio::spawn(crate::events::listen_for_ends(
        inner.broker.clone(),
        move |task| {
            let _ = sender.send(task);
        },
        move |listening| {
            bound.send_replace(listening);
        },
        stop.clone(),
    ));
    let mut idle_since: Option<tokio::time::Instant> = None;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if inner.sender.receiver_count() > 0 {
            idle_since = None;
            continue;
        }
        if idle_since
            .get_or_insert_with(tokio::time::Instant::now)
            .elapsed()
            < IDLE
        {
            continue;
        }
        inner.listening.store(false, Ordering::Release);
        // Someone may have subscribed between the count and the store: take it back.
        if inner.sender.receiver_count() == 0 || inner.listening.swap(true, Ordering::AcqRel) {
            break;
        }
        idle_since = None;
    }
    stop.cancel();
    let _ = listener.await;
}

/// Streams the ends of the given tasks as they come, then `done`.
#[utoipa::path(
    post, path = "/api/v1/tasks/wait", tag = "tasks", request_body = WaitRequest,
    responses((status = 200, description = "text/event-stream of `ended` (a TaskView), `missing` and `done` events"),
              (status = 400, body = crate::error::ErrorBody),
              (status = 429, description = "the token, or the API, holds its most streams", body = crate::error::ErrorBody))
)]
pub async fn wait_tasks(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<WaitRequest>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Response> {
    if request.ids.is_empty() || request.ids.len() > MAX_WAITED {
        return Err(ApiError::bad_request(format!(
            "ids: give 1 to {MAX_WAITED} task ids (got {})",
            request.ids.len()
        ))
        .into_response());
    }
    // Held by the stream for its life: streams are bounded per token and in all.
    let slot = state
        .streams
        .take(&caller.0.name)
        .map_err(IntoResponse::into_response)?;
    // Subscribed before the first read: an end between the two is in the feed.
    let (ends, bound) = state.ends.subscribe();
    let (events, received) = mpsc::channel(64);
    let pending: HashSet<Uuid> = request.ids.into_iter().collect();
    tokio::spawn(
        follow(
            state.store.clone(),
            pending,
            ends,
            bound,
            events,
            state.shutdown.clone(),
        )
        .instrument(info_span!("task_wait")),
    );
    let stream = futures::stream::unfold((received, slot), |(mut received, slot)| async move {
        let event = received.recv().await?;
        Some((Ok(event), (received, slot)))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Sends each pending task's end as it comes, until none is pending, the client leaves or the
/// server stops.
async fn follow(
    store: Store,
    mut pending: HashSet<Uuid>,
    mut ends: broadcast::Receiver<Uuid>,
    mut bound: watch::Receiver<bool>,
    events: mpsc::Sender<Event>,
    shutdown: CancellationToken,
) {
    // The first read once the listener hears every event: an end after it is then heard.
    let _ = tokio::time::timeout(BIND_WAIT, bound.wait_for(|bound| *bound)).await;
    let mut first = true;
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.tick().await;
    loop {
        let look: Vec<Uuid> = if first {
            first = false;
            pending.iter().copied().collect()
        } else {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = events.closed() => return,
                _ = recheck.tick() => pending.iter().copied().collect(),
                moved = ends.recv() => match moved {
                    Ok(id) => {
                        let mut ids = vec![id];
                        while let Ok(id) = ends.try_recv() {
                            ids.push(id);
                        }
                        ids.retain(|id| pending.contains(id));
                        ids
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        pending.iter().copied().collect()
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        };
        if look.is_empty() {
            continue;
        }
        match sent_ends(&store, &look, &mut pending, &events).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => debug!(%error, "cannot read the waited tasks; trying again"),
        }
        if pending.is_empty() {
            let _ = events.send(Event::default().event("done").data("{}")).await;
            return;
        }
    }
}

/// Reads `ids` and sends those that ended (and those that do not exist); false when the client
/// has gone.
async fn sent_ends(
    store: &Store,
    ids: &[Uuid],
    pending: &mut HashSet<Uuid>,
    events: &mpsc::Sender<Event>,
) -> Result<bool, chime_core::store::StoreError> {
    let summaries = tasks::summaries(store, ids).await?;
    let found: HashSet<Uuid> = summaries.iter().map(|t| t.id).collect();
    for id in ids.iter().filter(|id| !found.contains(id)) {
        pending.remove(id);
        let data = serde_json::json!({ "id": id }).to_string();
        if events
            .send(Event::default().event("missing").data(data))
            .await
            .is_err()
        {
            return Ok(false);
        }
    }
    for summary in summaries.iter().filter(|t| t.status.is_terminal()) {
        let task = tasks::get(store, summary.id).await?;
        pending.remove(&summary.id);
        let data = serde_json::to_string(&task).unwrap_or_default();
        if events
            .send(Event::default().event("ended").data(data))
            .await
            .is_err()
        {
            return Ok(false);
        }
    }
    Ok(true)
}
