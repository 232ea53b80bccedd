//! Whether the store is there to write to, as this process sees it, and which server it is.
//!
//! PostgreSQL under a failover manager (Patroni, pg_auto_failover, a managed service) moves: the
//! primary dies or is switched over, a standby is promoted, and the address chime connects to (a
//! proxy such as HAProxy, a DNS name, a virtual IP) follows it. Two things here carry a process
//! through the move:
//!
//! - [`refuse_standby`], run on every new connection: one that lands on a read-only server (a
//!   standby, or a primary being demoted that the proxy has not dropped yet) is refused as if the
//!   address had refused it, so the pool backs off and tries again instead of handing out a
//!   session whose every write fails (SQLSTATE 25006). sqlx has no `target_session_attrs`; this
//!   is its stand-in.
//! - [`watch`], one loop per process, asks every second which server answers, and says in the
//!   logs and metrics when the store went away, for how long, and on which server it came back.
//!
//! ```text
//!   answering (server A) ──no answer──▶ away (since t, was A) ──answer──▶ answering (server B)
//!        │                                                       logs "back after Δt, on B, was A"
//!        └──an answer slower than 2 s, or from another server──▶ answering (server B), logged alike
//! ```
//!
//! What else the move needs lives with what it concerns: a write a loop retries after a
//! connection error is idempotent by the ids it carries (a commit's outcome is unknown when the
//! primary dies under it); listeners open their session again and their callers rescan
//! (`notify.rs`); recovery declares no worker dead for a while after it finds a new server
//! (`task_lifecycle/recovery.rs`), since every lease ran out while nobody could renew it.

use std::fmt;
use std::time::{Duration, Instant};

use sqlx::PgConnection;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::Store;

/// How often [`watch`] asks which server answers.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// How long one of its questions may take before the store counts as away.
const WATCH_TIMEOUT: Duration = Duration::from_secs(5);
/// An answer slower than this counts as an outage from when the question was asked: the pool
/// may have spent it trying servers that refused it (a standby in a failover), which is an
/// outage to everything else the process asks meanwhile.
const WATCH_SLOW: Duration = Duration::from_secs(2);
/// How often an outage that goes on is logged again.
const AWAY_REMINDER: Duration = Duration::from_secs(30);

/// The error a read-only server's connection is refused with (inside an
/// [`std::io::ErrorKind::ConnectionRefused`], which the pool retries and a worker's liveness
/// session counts as the server refusing it).
#[derive(Debug)]
pub struct StandbyRefused;

impl fmt::Display for StandbyRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the server is read-only (a standby, or a primary being demoted in a failover): \
             chime writes to the primary only",
        )
    }
}

impl std::error::Error for StandbyRefused {}

/// Refuses a connection to a read-only server, with a refusal the pool waits out (it tries again
/// with a backoff until its acquire timeout) rather than an error every statement would meet.
pub async fn refuse_standby(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    let read_only: String = sqlx::query_scalar("SELECT current_setting('transaction_read_only')")
        .fetch_one(&mut *conn)
        .await?;
    if read_only == "on" {
        return Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            StandbyRefused,
        )));
    }
    Ok(())
}

/// The server that answers: its name, its address and port, and when it started, which tells a
/// restart or a failover to a server at the same address. The name is the server's setting
/// `chime.node` where an operator gave each server one (chime's compose stack for Patroni
/// does: Patroni sets `cluster_name` to the cluster's name on every node), else its
/// `cluster_name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// `chime.node`, else `cluster_name`; empty when neither is set.
    pub name: String,
    /// `inet_server_addr():inet_server_port()`, or "local socket".
    pub address: String,
    /// `pg_postmaster_start_time()`, as text.
    pub started: String,
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() {
            f.write_str(&self.address)
        } else {
            write!(f, "{} at {}", self.name, self.address)
        }
    }
}

/// Asks which server answers.
pub async fn server(store: &Store) -> Result<Server, sqlx::Error> {
    let (name, address, started): (String, Option<String>, String) = sqlx::query_as(
        "SELECT coalesce(nullif(current_setting('chime.node', true), ''),
                         current_setting('cluster_name')),
                host(inet_server_addr()) || ':' || inet_server_port(),
                pg_postmaster_start_time()::text",
    )
    .fetch_one(store.pool())
    .await?;
    Ok(Server {
        name,
        address: address.unwrap_or_else(|| "local socket".to_owned()),
        started,
    })
}

/// What the watch knows.
enum Seen {
    /// Nothing yet (the process just started).
    Nothing,
    Answering(Server),
    Away {
        since: Instant,
        last: Option<Server>,
        reminded: Instant,
    },
}

/// Watches the store until `stop`: logs and counts each outage and each change of server
/// (metrics `chime_store_connected{server}`, `chime_store_outages_total`,
/// `chime_store_outage_seconds`, `chime_store_server_changes_total`).
pub async fn watch(store: Store, stop: CancellationToken) {
    async move {
        let mut seen = Seen::Nothing;
        let mut tick = tokio::time::interval(WATCH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let asked = Instant::now();
            let answer = tokio::select! {
                _ = stop.cancelled() => return,
                answer = tokio::time::timeout(WATCH_TIMEOUT, server(&store)) => answer,
            };
            seen = match answer {
                Ok(Ok(now)) => answered(seen, asked, now),
                Ok(Err(error)) => unanswered(seen, asked, &error.to_string()),
                Err(_) => unanswered(seen, asked, &format!("no answer in {WATCH_TIMEOUT:?}")),
            };
        }
    }
    .instrument(info_span!("store_watch"))
    .await
}

/// `asked`: when the question answered was asked.
fn answered(seen: Seen, asked: Instant, now: Server) -> Seen {
    let (away, last) = match seen {
        Seen::Nothing => {
            info!(server = %now, "PostgreSQL answers");
            connected(&now, 1.0);
            return Seen::Answering(now);
        }
        Seen::Answering(before) if before == now && asked.elapsed() < WATCH_SLOW => {
            return Seen::Answering(before);
        }
        // Slow, or from another server: away from the question to its answer.
        Seen::Answering(before) => {
            metrics::counter!("chime_store_outages_total").increment(1);
            (asked.elapsed(), Some(before))
        }
        Seen::Away { since, last, .. } => (since.elapsed(), last),
    };
    metrics::histogram!("chime_store_outage_seconds").record(away.as_secs_f64());
    match last {
        Some(last) if last != now => {
            metrics::counter!("chime_store_server_changes_total").increment(1);
            connected(&last, 0.0);
            warn!(
                server = %now,
                was = %last,
                away_ms = away.as_millis() as u64,
                "PostgreSQL is back, on another server (a failover, a switchover or a restart)"
            );
        }
        _ => warn!(server = %now, away_ms = away.as_millis() as u64, "PostgreSQL is back"),
    }
    connected(&now, 1.0);
    Seen::Answering(now)
}

/// `asked`: when the question that went unanswered was asked, from which the outage counts.
fn unanswered(seen: Seen, asked: Instant, error: &str) -> Seen {
    match seen {
        Seen::Away {
            since,
            last,
            reminded,
        } => {
            if reminded.elapsed() < AWAY_REMINDER {
                return Seen::Away {
                    since,
                    last,
                    reminded,
                };
            }
            warn!(
                was = %last.as_ref().map_or_else(|| "none yet".to_owned(), ToString::to_string),
                away_ms = since.elapsed().as_millis() as u64,
                error,
                "PostgreSQL is still away"
            );
            Seen::Away {
                since,
                last,
                reminded: Instant::now(),
            }
        }
        Seen::Answering(last) => {
            warn!(server = %last, error, "PostgreSQL went away");
            metrics::counter!("chime_store_outages_total").increment(1);
            connected(&last, 0.0);
            Seen::Away {
                since: asked,
                last: Some(last),
                reminded: Instant::now(),
            }
        }
        Seen::Nothing => {
            warn!(error, "PostgreSQL does not answer");
            metrics::counter!("chime_store_outages_total").increment(1);
            Seen::Away {
                since: asked,
                last: None,
                reminded: Instant::now(),
            }
        }
    }
}

fn connected(server: &Server, value: f64) {
    let label = server.to_string();
    metrics::gauge!("chime_store_connected", "server" => label).set(value);
}
