//! The HTTP server under the API and every metrics port: HTTP/1.1 connections accepted up to a
//! cap, each with a deadline for its request headers, served until shutdown.
//!
//! `axum::serve` is not used because it gives an idle connection no deadline and copies the whole
//! router for every connection it accepts (about 1 MB for the API's, held as long as the socket
//! stays open, before any request): a client that opens sockets and sends nothing would exhaust
//! the process's memory. Here the router is shared by every connection, a connection that has
//! not sent a complete request head within [`HEADER_READ_TIMEOUT`] (its first, or the next one on
//! a kept-alive connection) is closed, and at most [`MAX_CONNECTIONS`] are served at once: the
//! rest wait in the kernel's listen backlog, costing this process nothing.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How many connections one listener serves at once.
pub const MAX_CONNECTIONS: usize = 1024;
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
    let permits = std::sync::Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, say: wait for connections to end rather than spin.
                    warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // The router is reference-counted: every connection shares it.
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                debug!(%error, "connection ended with an error");
            }
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
