//! `/api/v1/tasks/{id}/logs`: an attempt's output, whole or followed while it runs.
//!
//! Followed (`?follow=true`), the answer is a server-sent event stream: `output` events carry the
//! text added since the last one (`{"attempt":2,"text":"…"}`), an `attempt` event marks a new
//! attempt, and an `end` event (`{"status":"succeeded"}`) closes the stream once the task has
//! ended. Workers write a running attempt's output about once a second, and the stream reads it
//! from the database, so any API instance can serve any follower.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Extension, Path, Query, State};
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chime_core::model::TaskStatus;
use chime_core::store::attempt_output::{self, AttemptOutput};
use chime_core::store::{Store, StoreError};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// How often a follower reads the attempt's row.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// Which output, and whether to follow it.
#[derive(Debug, Deserialize, IntoParams)]
pub struct LogsQuery {
    /// The attempt (1 for the first); the latest when absent. A followed stream of the latest
    /// attempt moves on to the next attempt when there is one.
    pub attempt: Option<i32>,
    /// Stream the output as server-sent events until the task ends.
    #[serde(default)]
    pub follow: bool,
}

/// An attempt's output tail, as plain text (the attempt in `X-Chime-Attempt`), or followed as
/// server-sent events until the task ends.
#[utoipa::path(
    get, path = "/api/v1/tasks/{id}/logs", tag = "tasks",
    params(("id" = String, Path, description = "task id (UUID)"), LogsQuery),
    responses(
        (status = 200, description = "the output (text/plain), or a text/event-stream when following"),
        (status = 400, description = "not a UUID", body = ErrorBody),
        (status = 404, description = "no such task or attempt", body = ErrorBody),
    )
)]
pub async fn task_logs(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(query): Query<LogsQuery>,
) -> Result<Response, ApiError> {
    let id = super::parse_uuid(&id, "task")?;
    let (status, output) = attempt_output::read(&state.store, id, query.attempt).await?;
    if let (Some(attempt), None) = (query.attempt, &output) {
        return Err(ApiError::not_found(format!(
            "task {id} has no attempt {attempt} (it is {status})"
        )));
    }
    if query.follow {
        // Held by the stream for its life: followers are bounded per token and in all.
        let slot = match state.streams.take(&caller.0.name) {
            Ok(slot) => slot,
            Err(refused) => return Ok(refused.into_response()),
        };
        let stream = until_shutdown(
            follow(state.store.clone(), id, query.attempt, status, output),
            &state,
        )
        .map(move |event| {
            let _held = &slot;
            event
        });
        return Ok(Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let attempt = output.as_ref().map_or(0, |o| o.attempt);
    let text = output.map(|o| o.output).unwrap_or_default();
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/plain; charset=utf-8".to_string(),
            ),
            (
                header::HeaderName::from_static("x-chime-attempt"),
                attempt.to_string(),
            ),
        ],
        text,
    )
        .into_response())
}

/// What a follower has been sent.
struct Follower {
    store: Store,
    task: Uuid,
    /// A fixed attempt, or None to follow the latest.
    pinned: Option<i32>,
    attempt: i32,
    sent: String,
    /// The attempt's byte count when `sent` was read (while it ran).
    sent_bytes: Option<i64>,
    first: Option<(TaskStatus, Option<AttemptOutput>)>,
    ended: bool,
}

fn follow(
    store: Store,
    task: Uuid,
    pinned: Option<i32>,
    status: TaskStatus,
    output: Option<AttemptOutput>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let follower = Follower {
        store,
        task,
        pinned,
        attempt: 0,
        sent: String::new(),
        sent_bytes: None,
        first: Some((status, output)),
        ended: false,
    };
    futures::stream::unfold(follower, |mut follower| async move {
        loop {
            if follower.ended {
                return None;
            }
            let (status, output) = match follower.first.take() {
                Some(read) => read,
                None => {
                    tokio::time::sleep(FOLLOW_POLL).await;
                    match attempt_output::read(&follower.store, follower.task, follower.pinned)
                        .await
                    {
                        Ok(read) => read,
                        Err(StoreError::TaskNotFound(_)) => {
                            follower.ended = true;
                            return Some((vec![end_event("deleted")], follower));
                        }
                        // The database is away: keep the stream, read again.
                        Err(_) => continue,
                    }
                }
            };
            let mut events = Vec::new();
            if let Some(output) = output {
                if output.attempt != follower.attempt {
                    follower.attempt = output.attempt;
                    follower.sent.clear();
                    follower.sent_bytes = Some(0);
                    events.push(
                        Event::default()
                            .event("attempt")
                            .data(json!({ "attempt": output.attempt }).to_string()),
                    );
                }
                let added = match (follower.sent_bytes, output.bytes) {
                    // Both reads counted the bytes: exactly what was added.
                    (Some(before), Some(now)) if now >= before => {
                        last_bytes(&output.output, now - before)
                    }
                    _ => added_text(&follower.sent, &output.output),
                };
                follower.sent_bytes = output.bytes;
                if !added.is_empty() {
                    events.push(
                        Event::default()
                            .event("output")
                            .data(json!({ "attempt": output.attempt, "text": added }).to_string()),
                    );
                }
                follower.sent = output.output;
                // A pinned attempt that has ended has nothing more to say.
                if follower.pinned.is_some() && !output.running {
                    follower.ended = true;
                }
            }
            if status.is_terminal() {
                follower.ended = true;
            }
            if follower.ended {
                events.push(end_event(status.as_str()));
            }
            if !events.is_empty() {
                return Some((events, follower));
            }
        }
    })
    .flat_map(|events| futures::stream::iter(events.into_iter().map(Ok)))
}

/// Ends `stream` when the server shuts down.
fn until_shutdown<S: Stream>(stream: S, state: &AppState) -> impl Stream<Item = S::Item> + use<S> {
    stream.take_until(state.shutdown.clone().cancelled_owned())
}

/// The last `count` bytes of `text` (from a character boundary), with a mark when more was
/// added than the tail still holds.
fn last_bytes(text: &str, count: i64) -> String {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count > text.len() {
        return format!("[… output skipped …]\n{text}");
    }
    let mut start = text.len() - count;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

fn end_event(status: &str) -> Event {
    Event::default()
        .event("end")
        .data(json!({ "status": status }).to_string())
}

/// What `now` adds to `before`. The output is a bounded tail, so once it is full its start moves:
/// the new text is found after the last part of `before` that `now` still holds, and when
/// nothing of it is left, all of `now` is new (with a mark that some was skipped).
fn added_text(before: &str, now: &str) -> String {
    if let Some(added) = now.strip_prefix(before) {
        return added.to_string();
    }
    let anchor_len = before.len().min(256);
    let mut start = before.len() - anchor_len;
    while !before.is_char_boundary(start) {
        start += 1;
    }
    let anchor = &before[start..];
    match now.rfind(anchor) {
        Some(at) if !anchor.is_empty() => now[at + anchor.len()..].to_string(),
        _ => format!("[… output skipped …]\n{now}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{added_text, last_bytes};

    #[test]
    fn counted_bytes_give_what_was_added_even_in_repetitive_output() {
        assert_eq!(last_bytes("......", 2), "..");
        assert_eq!(last_bytes("abc", 0), "");
        assert_eq!(last_bytes("ab", 5), "[… output skipped …]\nab");
        assert_eq!(last_bytes("aé", 1), "");
    }

    #[test]
    fn new_text_is_what_follows_what_was_sent() {
        assert_eq!(added_text("", "abc"), "abc");
        assert_eq!(added_text("abc", "abcdef"), "def");
        assert_eq!(added_text("abc", "abc"), "");
        // the tail moved: its first bytes dropped from the front
        let before = format!("head{}", "0123456789".repeat(30));
        let now = format!("{}new", &before[4..]);
        assert_eq!(added_text(&before, &now), "new");
        assert_eq!(added_text("abc", "xyz"), "[… output skipped …]\nxyz");
    }
}
