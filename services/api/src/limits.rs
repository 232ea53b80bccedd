//! What one client may hold of the API at once: long-lived streams (the event feed, followed
//! logs), bytes of batch bodies in flight, and the time it may take to send a body.
//!
//! Each is bounded so that no client, with any role, can take what the others and the health
//! checks need. A stream holds a connection for as long as its client likes: without a bound,
//! 1,024 of them (the read role suffices) took every connection the server serves, and
//! `/healthz` stopped answering. A 15 MB batch costs several times its size while it is parsed
//! and recorded: 16 at once took the API to 1.1 GB. A body sent a byte at a time holds its
//! connection for as long as the client likes. The connections themselves are bounded per peer
//! and in all by the server (`http_server.rs`), which also keeps health answering past them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// The most streams (event feeds and followed logs) one API process serves at once.
pub const MAX_STREAMS: usize = 256;
/// The most streams one token (or, without tokens, the local user) holds at once.
pub const MAX_STREAMS_PER_TOKEN: usize = 32;
/// How long a client has to send a request's whole body, from when its headers arrived.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of batch bodies (`POST /api/v1/tasks/batch`) read and being recorded at once;
/// a batch that would pass it waits for room (up to [`BODY_READ_TIMEOUT`], then 503 with
/// Retry-After).
pub const MAX_BATCH_BYTES_IN_FLIGHT: usize = 32 * 1024 * 1024;

/// The streams open, in all and by token.
#[derive(Debug, Default)]
pub struct StreamSlots {
    open: Mutex<HashMap<String, usize>>,
}

/// One stream's place: held for the stream's life, given back when it is dropped.
#[derive(Debug)]
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    holder: String,
}

impl StreamSlots {
    /// A place for a stream of `holder` (a token's name), or 429 (the holder has its share) or
    /// 503 (the process has none left), each saying how many and what to do, and closing its
    /// connection: a client refused a stream does not keep the connection either.
    pub fn take(self: &Arc<Self>, holder: &str) -> Result<StreamSlot, StreamRefused> {
        self.try_take(holder).map_err(StreamRefused)
    }

    fn try_take(self: &Arc<Self>, holder: &str) -> Result<StreamSlot, ApiError> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "stream slots lost"))?;
        let total: usize = open.values().sum();
        let mine = open.get(holder).copied().unwrap_or(0);
        if mine >= MAX_STREAMS_PER_TOKEN {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "{holder:?} has {mine} streams open (event feeds and followed logs), the most \
                     one token may hold: close one first"
                ),
            ));
        }
        if total >= MAX_STREAMS {
            // 429 too, not 503: a client's asking, not a failure of the API's, and not logged.
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this API serves {total} streams (event feeds and followed logs), its most: \
                     try again later"
                ),
            ));
        }
        *open.entry(holder.to_string()).or_default() += 1;
        metrics::gauge!("chime_api_streams_open").set((total + 1) as f64);
        Ok(StreamSlot {
            slots: self.clone(),
            holder: holder.to_string(),
        })
    }
}

/// A stream refused: its error, and its connection closed.
#[derive(Debug)]
pub struct StreamRefused(ApiError);

impl IntoResponse for StreamRefused {
    fn into_response(self) -> Response {
        let mut refused = self.0.into_response();
        refused
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        refused
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let Ok(mut open) = self.slots.open.lock() else {
            return;
        };
        if let Some(n) = open.get_mut(&self.holder) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.holder);
            }
        }
        metrics::gauge!("chime_api_streams_open").set(open.values().sum::<usize>() as f64);
    }
}

/// The bytes of batch bodies in flight.
#[derive(Debug)]
pub struct BatchBytes(Arc<Semaphore>);

impl Default for BatchBytes {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(MAX_BATCH_BYTES_IN_FLIGHT)))
    }
}

impl BatchBytes {
    /// Room for a batch body of at most `bytes`, held until the answer is made, waited for up
    /// to [`BODY_READ_TIMEOUT`] (the body waits in the socket meanwhile, costing nothing here);
    /// None when no room came.
    async fn take(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let permits = u32::try_from(bytes.min(MAX_BATCH_BYTES_IN_FLIGHT)).unwrap_or(u32::MAX);
        tokio::time::timeout(
            BODY_READ_TIMEOUT,
            self.0.clone().acquire_many_owned(permits),
        )
        .await
        .ok()?
        .ok()
    }
}

/// 503 with Retry-After, for a batch that found no room. Built here rather than as an
/// [`ApiError`], which logs every 5xx: a busy answer is not a failure.
fn batches_busy() -> Response {
    let mut refused = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({
            "error": format!(
                "batches being recorded hold {} MB, the most at once: try again in a moment",
                MAX_BATCH_BYTES_IN_FLIGHT / (1024 * 1024)
            )
        })),
    )
        .into_response();
    refused
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    refused
}

/// Reads a request's whole body within [`BODY_READ_TIMEOUT`] (at most `limit` bytes, the
/// route's own limit then applies to it as before), so a client trickling a body holds its
/// connection for that long at most; a batch first takes its room in [`BatchBytes`]. A body
/// that is late is answered 408 and its connection closed.
pub async fn read_body_in_time(
    batches: &BatchBytes,
    limit: usize,
    batch: bool,
    request: Request,
    next: Next,
) -> Response {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    // Room for what the body says it is, or for the most it may be.
    let room = if batch {
        match batches.take(declared.unwrap_or(limit).min(limit)).await {
            Some(room) => Some(room),
            None => {
                // Read and dropped as it comes, so the client, still sending, hears the answer
                // rather than a broken pipe.
                let drained = tokio::time::timeout(
                    BODY_READ_TIMEOUT,
                    request
                        .into_body()
                        .into_data_stream()
                        .take_while(|frame| std::future::ready(frame.is_ok()))
                        .for_each(|_| std::future::ready(())),
                )
                .await;
                let _ = drained;
                return batches_busy();
            }
        }
    } else {
        None
    };
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit)).await;
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        // Too long, or broken off: the route's own extractor says which, as before.
        Ok(Err(error)) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("cannot read the request body: {error} (at most {limit} bytes)"),
            )
            .into_response();
        }
        Err(_) => {
            let mut late = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    BODY_READ_TIMEOUT.as_secs()
                ),
            )
            .into_response();
            late.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return late;
        }
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if let Some(room) = room {
        drop(room);
        give_back_memory();
    }
    response
}

/// Hands the memory a batch freed back to the system. glibc keeps what a thread freed in that
/// thread's arena for reuse, so without this the API stayed at the size its largest burst of
/// batches took (431 of 446 MiB after sixteen 15 MB batches); `malloc_trim` returns the free
/// pages of every arena. It walks the heap (milliseconds), so it runs once per batch, off the
/// runtime's threads.
fn give_back_memory() {
    tokio::task::spawn_blocking(|| {
        // SAFETY: malloc_trim only releases free memory of the allocator's own arenas; it takes
        // the arenas' locks like any allocation.
        unsafe { libc::malloc_trim(0) };
    });
}
