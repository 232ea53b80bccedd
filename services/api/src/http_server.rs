//! The HTTP server under the API and every metrics port: HTTP/1.1 connections accepted up to a
//! cap in all and per peer, each with a deadline for its request headers, served until
//! shutdown; past the caps, a small reserve still answers health checks.
//!
//! `axum::serve` is not used because it gives an idle connection no deadline and copies the whole
//! router for every connection it accepts (about 1 MB for the API's, held as long as the socket
//! stays open, before any request): a client that opens sockets and sends nothing would exhaust
//! the process's memory. Here the router is shared by every connection, a connection that has
//! not sent a complete request head within [`HEADER_READ_TIMEOUT`] (its first, or the next one on
//! a kept-alive connection) is closed, and at most [`MAX_CONNECTIONS`] are served at once, at most
//! [`MAX_CONNECTIONS_PER_PEER`] of them from one address. A connection past either cap is served
//! from a reserve of [`HEALTH_CONNECTIONS`] ([`HEALTH_CONNECTIONS_PER_PEER`] per address) that
//! answers `/healthz` and `/readyz` only (anything else: 503, and the connection closes), so a
//! load balancer's checks are answered whoever holds the rest. With both full, new connections
//! wait in the kernel's listen backlog, costing this process nothing.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How many connections one listener serves at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// How many of them one address may hold.
pub const MAX_CONNECTIONS_PER_PEER: usize = 256;
/// Connections served past those caps, for health checks only.
pub const HEALTH_CONNECTIONS: usize = 64;
/// How many of those one address may hold.
pub const HEALTH_CONNECTIONS_PER_PEER: usize = 8;
/// How long a client has to send a request's headers, counted from when the connection opened or
/// its previous response was sent: an idle kept-alive connection is closed after it too.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stopping server waits for the requests in flight to be answered.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown`, then lets the requests in flight finish (up to
/// [`SHUTDOWN_GRACE`]; long-lived streams end on the same signal) and closes idle connections.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let regular = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let reserve = Arc::new(Semaphore::new(HEALTH_CONNECTIONS));
    let peers: Arc<Mutex<HashMap<(IpAddr, Pool), usize>>> = Arc::default();
    // Built once: a layer per connection would copy the router.
    let health_only = app.clone().layer(axum::middleware::from_fn(health_only));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    loop {
        if regular.available_permits() == 0 && reserve.available_permits() == 0 {
            // Nothing to serve a connection with: new ones wait in the backlog until one ends.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = regular.acquire() => {}
                _ = reserve.acquire() => {}
            }
        }
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, peer.ip()),
                Err(error) => {
                    // Out of file descriptors, say: wait for connections to end rather than spin.
                    warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let taken = take_place(&peers, peer, Pool::Regular)
            .and_then(|place| Some((regular.clone().try_acquire_owned().ok()?, place, &app)))
            .or_else(|| {
                let place = take_place(&peers, peer, Pool::Health)?;
                Some((
                    reserve.clone().try_acquire_owned().ok()?,
                    place,
                    &health_only,
                ))
            });
        let Some((permit, place, router)) = taken else {
            // Its address holds its share of both: closed at once.
            metrics::counter!("chime_api_connections_refused_total").increment(1);
            continue;
        };
        let _ = stream.set_nodelay(true);
        // The router is reference-counted: every connection shares it.
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                debug!(%error, "connection ended with an error");
            }
            drop(place);
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("requests still in flight after {SHUTDOWN_GRACE:?}; stopping anyway");
    }
    Ok(())
}

/// Which connections a place counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Pool {
    Regular,
    Health,
}

/// One connection of an address, counted while it lives.
struct Place {
    peers: Arc<Mutex<HashMap<(IpAddr, Pool), usize>>>,
    key: (IpAddr, Pool),
}

/// A place for a connection of `peer` in `pool`, unless the address holds its share there (or a
/// mutex holder panicked: then no place, and the connection is refused).
fn take_place(
    peers: &Arc<Mutex<HashMap<(IpAddr, Pool), usize>>>,
    peer: IpAddr,
    pool: Pool,
) -> Option<Place> {
    let cap = match pool {
        Pool::Regular => MAX_CONNECTIONS_PER_PEER,
        Pool::Health => HEALTH_CONNECTIONS_PER_PEER,
    };
    let mut held = peers.lock().ok()?;
    let n = held.entry((peer, pool)).or_default();
    if *n >= cap {
        return None;
    }
    *n += 1;
    Some(Place {
        peers: peers.clone(),
        key: (peer, pool),
    })
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Ok(mut held) = self.peers.lock()
            && let Some(n) = held.get_mut(&self.key)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// A connection from the reserve answers health checks only.
async fn health_only(request: Request, next: Next) -> Response {
    if matches!(request.uri().path(), "/healthz" | "/readyz") {
        return next.run(request).await;
    }
    let mut busy = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({
            "error": format!(
                "this server serves its most connections ({MAX_CONNECTIONS}, \
                 {MAX_CONNECTIONS_PER_PEER} from one address): try again later"
            )
        })),
    )
        .into_response();
    busy.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    busy
}
