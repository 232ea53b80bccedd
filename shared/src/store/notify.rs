//! NOTIFY as a wake-up hint. Whoever waits on a listener also polls: a notification lost while a
//! listener reconnects is found by the next scan.

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};
use tracing::{debug, warn};

use super::Store;

/// A listener on `channel`, or None (the caller then only polls) when it cannot be opened. It has
/// a connection of its own, outside the store's pool: a pool sized for work keeps all of it.
pub async fn listen(store: &Store, channel: &str) -> Option<PgListener> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(store.pool().connect_options().as_ref().clone());
    let mut listener = match PgListener::connect_with(&own).await {
        Ok(listener) => listener,
        Err(error) => {
            warn!(%error, channel, "cannot open a listener connection; polling only");
            return None;
        }
    };
    match listener.listen(channel).await {
        Ok(()) => Some(listener),
        Err(error) => {
            warn!(%error, channel, "LISTEN failed; polling only");
            None
        }
    }
}

/// Resolves on the next notification (never, without a listener). A listener that lost its
/// connection reconnects inside `recv`; the interruption also resolves, so the caller rescans.
pub async fn notified(listener: &mut Option<PgListener>) {
    match listener.as_mut() {
        Some(listener) => {
            if let Err(error) = listener.recv().await {
                debug!(%error, "listener interrupted");
            }
        }
        None => std::future::pending().await,
    }
}
