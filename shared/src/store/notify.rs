//! NOTIFY as a wake-up hint. Whoever waits on a [`Listener`] also polls: a notification is never
//! the only way to learn of a change.
//!
//! Notifications are not kept: one sent while a listener's session is down (PostgreSQL
//! restarting, a failover to a standby, which never had the old primary's LISTENs) is gone. So a
//! listener that loses its session wakes its caller at once, opens a new session with a backoff,
//! and wakes its caller again once it listens there: each wake-up is a rescan, and the rescan
//! after the new LISTEN finds whatever was missed in between.
//!
//! ```text
//!   listening ──session lost──▶ wake (rescan) ──▶ reopening ──LISTEN──▶ wake (rescan) ──▶ listening
//!                                                    └─ refused: wait 0.1 s … 5 s, try again
//! ```

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};
use tracing::{debug, info, warn};

use super::Store;

/// The first wait before opening a lost session again; it doubles up to [`REOPEN_MAX`].
const REOPEN_MIN: Duration = Duration::from_millis(100);
const REOPEN_MAX: Duration = Duration::from_secs(5);

/// A LISTEN on one channel, over a connection of its own outside the store's pool (a pool sized
/// for work keeps all of it), that opens itself again whenever it is lost.
pub struct Listener {
    store: Store,
    channel: String,
    session: Option<PgListener>,
    /// The wait after a failed attempt to open the session.
    backoff: Duration,
    /// When to try to open it next (a deadline, not a sleep: the caller's `select!` drops a
    /// wait at each of its polls, and a sleep would start over each time).
    retry_at: tokio::time::Instant,
    /// An attempt to open the session under way, in a task of its own for the same reason: a
    /// connect dropped halfway would start over at every poll, and never finish when the
    /// caller's shortest wait is shorter than a connect.
    opening: Option<tokio::task::JoinHandle<Result<PgListener, sqlx::Error>>>,
    /// Whether the session was lost (or never opened) since the caller last heard of it: the
    /// first answer after opening it again is a wake-up.
    lost: bool,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("channel", &self.channel)
            .field("listening", &self.session.is_some())
            .finish()
    }
}

impl Listener {
    /// Listens on `channel`. A session that cannot be opened now is opened later, while the
    /// caller waits in [`Listener::notified`] (and polls meanwhile).
    pub async fn open(store: &Store, channel: &str) -> Self {
        let mut listener = Self {
            store: store.clone(),
            channel: channel.to_owned(),
            session: None,
            backoff: REOPEN_MIN,
            retry_at: tokio::time::Instant::now(),
            opening: None,
            lost: false,
        };
        match connect(listener.store.clone(), listener.channel.clone()).await {
            Ok(session) => listener.session = Some(session),
            Err(error) => {
                warn!(%error, channel, "cannot open a listener connection yet; polling meanwhile");
                listener.lost = true;
            }
        }
        listener
    }

    /// Resolves on the next notification, when the session is lost, and when a lost session
    /// listens again: the caller rescans each time. Cancel-safe: a wait dropped halfway goes on
    /// at the next call.
    pub async fn notified(&mut self) {
        loop {
            if let Some(session) = self.session.as_mut() {
                match session.try_recv().await {
                    Ok(Some(_)) => return,
                    Ok(None) => {
                        warn!(channel = %self.channel, "listener connection lost; rescanning, then listening again")
                    }
                    Err(error) => {
                        warn!(%error, channel = %self.channel, "listener failed; rescanning, then listening again")
                    }
                }
                self.session = None;
                self.lost = true;
                self.retry_at = tokio::time::Instant::now() + self.backoff;
                metrics::counter!("chime_store_listener_losses_total").increment(1);
                return;
            }
            tokio::time::sleep_until(self.retry_at).await;
            let opening = self.opening.get_or_insert_with(|| {
                tokio::spawn(connect(self.store.clone(), self.channel.clone()))
            });
            let opened = opening.await;
            self.opening = None;
            match opened.unwrap_or_else(|e| Err(sqlx::Error::Protocol(e.to_string()))) {
                Ok(session) => {
                    self.session = Some(session);
                    self.backoff = REOPEN_MIN;
                    self.retry_at = tokio::time::Instant::now();
                    if std::mem::take(&mut self.lost) {
                        info!(channel = %self.channel, "listening again; rescanning for what was missed");
                        return;
                    }
                }
                Err(error) => {
                    debug!(%error, channel = %self.channel, "cannot open the listener connection yet");
                    self.backoff = (self.backoff * 2).min(REOPEN_MAX);
                    self.retry_at = tokio::time::Instant::now() + self.backoff;
                }
            }
        }
    }

    /// Whether the session listens now.
    pub fn listening(&self) -> bool {
        self.session.is_some()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(opening) = self.opening.take() {
            opening.abort();
        }
    }
}

/// Opens a session of its own on `store`'s database and listens on `channel` there.
async fn connect(store: Store, channel: String) -> Result<PgListener, sqlx::Error> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(store.pool().connect_options().as_ref().clone());
    let mut session = PgListener::connect_with(&own).await?;
    // A lost connection comes back from `try_recv` as `Ok(None)` and is opened again here, with
    // a backoff and a wake-up for the rescan, not silently inside sqlx.
    session.eager_reconnect(false);
    // On a standby (a failover under way) LISTEN fails: the session is tried again later.
    session.listen(&channel).await?;
    Ok(session)
}
