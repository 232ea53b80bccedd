//! A worker's refusal-grace mark: how a worker that PostgreSQL refuses tells recovery, through
//! the broker, that it is alive and holding its attempts through what may be a restart.
//!
//! A refusal looks the same to one worker whether the server restarted (everyone refused: nobody
//! can declare anyone dead until it is back, and then recovery waits out
//! [`RESTART_GRACE`](crate::store::workers::RESTART_GRACE)) or something between it and the
//! server refuses it alone while recovery carries on (a firewall REJECT, a proxy restarting, a
//! Service without endpoints). So the worker holds its attempts past its lease only under a mark
//! recovery can see: a queue `<prefix>.grace.<worker id>`, exclusive to the worker's broker
//! connection, declared while its lease is still held and checked every
//! [`HEARTBEAT_INTERVAL`](crate::store::workers::HEARTBEAT_INTERVAL); each check that answers
//! holds the attempts [`MARK_LEASE`] longer, never past the restart grace from the first
//! refusal.
//!
//! Recovery declares a worker whose lease expired dead only once it has seen the mark absent for
//! [`ABSENT_FOR`] (longer than a mark's lease: whatever check last answered the worker, its
//! guard has killed by then), or once the restart grace has passed since the lease expired. A
//! worker killed with -9 has no mark (its connection, and the queue with it, went at once): it is
//! recovered about as soon as its lease expires. The broker says "absent" (404) or "another
//! connection's" (405) without changing anything.

use std::time::Duration;

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};

use super::Topology;

/// How long one answered check of the mark holds the worker's attempts, from when it was sent.
pub const MARK_LEASE: Duration = Duration::from_millis(1000);

/// How long recovery must have seen a mark absent (looking from no earlier than
/// [`LOOK_BEFORE_EXPIRY`] before the lease's end) before it declares its worker dead.
pub const ABSENT_FOR: Duration = Duration::from_millis(1500);

/// How long before a worker's lease expires recovery starts looking for its mark: a worker
/// enters its grace only while it holds its lease, which it counts as ending at least
/// `GUARD_MARGIN + 300 ms` = 800 ms before the database does (a heartbeat never moves the
/// database's expiry earlier); a look from then on comes after any mark the worker could still
/// make.
pub const LOOK_BEFORE_EXPIRY: Duration = Duration::from_millis(800);

fn queue_options(passive: bool) -> QueueDeclareOptions {
    QueueDeclareOptions {
        passive,
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    }
}

/// Declares the worker's mark on a channel of its own connection (kept: the mark is checked on
/// it).
pub async fn declare(
    conn: &Connection,
    topology: &Topology,
    worker_id: &str,
) -> lapin::Result<Channel> {
    let channel = conn.create_channel().await?;
    channel
        .queue_declare(
            topology.grace_queue(worker_id).into(),
            queue_options(false),
            FieldTable::default(),
        )
        .await?;
    Ok(channel)
}

/// Checks the worker's own mark: an answer means the broker still holds its connection, so
/// recovery still sees the mark.
pub async fn check(channel: &Channel, topology: &Topology, worker_id: &str) -> lapin::Result<()> {
    channel
        .queue_declare(
            topology.grace_queue(worker_id).into(),
            queue_options(true),
            FieldTable::default(),
        )
        .await
        .map(|_| ())
}

/// Removes the worker's mark (its lease is renewed again).
pub async fn remove(channel: &Channel, topology: &Topology, worker_id: &str) -> lapin::Result<()> {
    channel
        .queue_delete(
            topology.grace_queue(worker_id).into(),
            QueueDeleteOptions::default(),
        )
        .await
        .map(|_| ())
}

/// Whether the worker's mark is there, as recovery asks: Some(false) only when the broker says
/// it does not exist; None when the broker could not be asked, or did not answer within 2 s
/// (opening the channel included: a broker that hangs must not hold recovery).
pub async fn present(conn: &Connection, topology: &Topology, worker_id: &str) -> Option<bool> {
    tokio::time::timeout(Duration::from_secs(2), ask(conn, topology, worker_id))
        .await
        .ok()
        .flatten()
}

async fn ask(conn: &Connection, topology: &Topology, worker_id: &str) -> Option<bool> {
    // The broker closes a channel on either answer: one channel per question.
    let channel = conn.create_channel().await.ok()?;
    let asked = channel
        .queue_declare(
            topology.grace_queue(worker_id).into(),
            queue_options(true),
            FieldTable::default(),
        )
        .await;
    let answer = match asked {
        Ok(_) => Some(true),
        Err(error) => match error.kind() {
            lapin::ErrorKind::ProtocolError(error) => match error.get_id() {
                404 => Some(false),
                405 => Some(true),
                _ => None,
            },
            _ => None,
        },
    };
    if answer == Some(true) {
        // Not waited for: the answer is known, and a close that hangs would cost it.
        tokio::spawn(async move {
            let _ = channel.close(200, "asked".into()).await;
        });
    }
    answer
}
