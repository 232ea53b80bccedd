//! Issue 45: PostgreSQL failing over under chime, without Docker. A primary and a hot standby
//! (`pg_basebackup -R`, synchronous, as Patroni's `synchronous_mode` keeps one) behind a proxy
//! that follows the primary as HAProxy does on Patroni's `/primary`: the primary crashes, the
//! proxy closes every connection and, with no primary to send new ones to, accepts and closes
//! them; then it sends them to the standby before the standby is promoted (a read-only server,
//! as a demoted primary is for a moment in a switchover); then the standby is promoted.
//! `compose/test.sh ha` runs the same story on a real Patroni cluster.

use std::time::Duration;

use anyhow::{Context, Result};
use chime_core::model::{NewTask, TaskStatus};
use chime_core::store::notify::Listener;
use chime_core::store::task_lifecycle;
use chime_core::store::workers::LivenessSession;
use chime_tests::postgres::PrivatePostgres;
use chime_tests::proxy::Proxy;
use chime_tests::{TestEnv, eventually, eventually_within};
use uuid::Uuid;

const CHANNEL: &str = "failover_test";

/// Submits a shell task that appends its id to `ran` (after `sleep` seconds).
async fn submit_recorded(
    env: &TestEnv,
    topology: &chime_core::bus::Topology,
    ran: &std::path::Path,
    sleep: u32,
) -> Result<Uuid> {
    let task = task_lifecycle::submit(
        &env.store,
        topology,
        NewTask {
            kind: "shell".into(),
            spec: serde_json::json!({
                "command": format!("sleep {sleep}; echo $CHIME_TASK_ID >> {}", ran.display())
            }),
            ..NewTask::default()
        },
    )
    .await?;
    Ok(task.id)
}

/// The store refuses a read-only server and counts a proxy's closed door as a refusal; a
/// listener wakes its caller when its session is lost and again once it listens on the new
/// primary; a `chime up` through it all keeps its running task running and runs every task once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_a_promoted_standby_loses_nothing_and_listeners_listen_again() -> Result<()> {
    let primary = PrivatePostgres::start_durable().await?;
    let standby = primary.start_standby().await?;
    // Every commit acknowledged is on the standby, as under Patroni's synchronous_mode.
    let admin = format!("{}/postgres", primary.url());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin).await?;
    sqlx::query("ALTER SYSTEM SET synchronous_standby_names = '*'")
        .execute(&mut conn)
        .await?;
    sqlx::query("SELECT pg_reload_conf()")
        .execute(&mut conn)
        .await?;
    eventually("the standby to be synchronous", || {
        let admin = admin.clone();
        async move {
            let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin).await?;
            let sync: Option<String> = sqlx::query_scalar(
                "SELECT sync_state FROM pg_stat_replication WHERE sync_state = 'sync'",
            )
            .fetch_optional(&mut conn)
            .await?;
            Ok(sync.is_some())
        }
    })
    .await?;
    drop(conn);

    let proxy = Proxy::start(&format!("127.0.0.1:{}", primary.port())).await?;
    let (_, amqp) = chime_tests::server_urls();
    let env = TestEnv::with_amqp_url(
        &format!("postgres://postgres@127.0.0.1:{}", proxy.port()),
        &amqp,
    )
    .await?;
    let topology = chime_core::bus::Topology::new(env.settings.prefix.clone());
    let dir = chime_tests::scratch_dir("failover")?;
    let ran = dir.join("ran");
    let log = dir.join("chime-up.log");
    let api_addr = env.settings.api_addr.clone();
    let mut up = env
        .chime_command(&["up", "--api-addr", &api_addr])?
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    env.track(&up);

    let mut before = Vec::new();
    for _ in 0..5 {
        before.push(submit_recorded(&env, &topology, &ran, 0).await?);
    }
    for id in &before {
        env.wait_status(*id, TaskStatus::Succeeded).await?;
    }
    // Runs through the failover: its worker holds it while the database refuses it.
    let through = submit_recorded(&env, &topology, &ran, 6).await?;
    env.wait_status(through, TaskStatus::Running).await?;
    let mut listener = Listener::open(&env.store, CHANNEL).await;
    anyhow::ensure!(listener.listening(), "the listener listens on the primary");

    // The primary dies; the proxy has nowhere to send connections: it closes them (cut first,
    // so that no connection meets the dying server's refusals instead).
    proxy.cut();
    primary.crash().await?;
    tokio::time::timeout(Duration::from_secs(30), listener.notified())
        .await
        .context("the listener did not wake its caller when its session was lost")?;
    anyhow::ensure!(!listener.listening());
    let closed = LivenessSession::open(&env.store)
        .await
        .err()
        .context("a session opened with no server behind the proxy")?;
    assert!(
        LivenessSession::server_is_down(&closed),
        "a proxy's closed door is a refusal: {closed}"
    );
    let closed_door = matches!(
        &closed,
        chime_core::store::StoreError::Database {
            source: sqlx::Error::Io(io),
            ..
        } if matches!(
            io.kind(),
            std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
        )
    );
    assert!(closed_door, "the proxy closed the connection: {closed:?}");

    // The proxy sends new connections to the standby before its promotion: read-only.
    proxy.retarget(&format!("127.0.0.1:{}", standby.port()));
    proxy.restore();
    // (The proxy's port opens once the standby answers it.)
    eventually(
        "a session on the standby to be refused as read-only",
        || async {
            match LivenessSession::open(&env.store).await {
                Ok(_) => anyhow::bail!("a session opened on a read-only standby"),
                Err(refused) => {
                    assert!(
                        LivenessSession::server_is_down(&refused),
                        "a standby refuses: {refused}"
                    );
                    Ok(refused.to_string().contains("read-only"))
                }
            }
        },
    )
    .await?;
    // LISTEN is refused there too, so the listener does not claim to listen.
    let woke = tokio::time::timeout(Duration::from_secs(2), listener.notified()).await;
    assert!(
        woke.is_err() && !listener.listening(),
        "the listener listens on a standby"
    );

    standby.promote().await?;
    tokio::time::timeout(Duration::from_secs(30), listener.notified())
        .await
        .context("the listener did not wake its caller once it listened on the new primary")?;
    anyhow::ensure!(listener.listening(), "the listener listens again");
    sqlx::query("SELECT pg_notify($1, 'after the failover')")
        .bind(CHANNEL)
        .execute(env.store.pool())
        .await?;
    tokio::time::timeout(Duration::from_secs(30), listener.notified())
        .await
        .context("a notification on the new primary did not reach the listener")?;

    // The task that ran through the failover ends once, at its first attempt.
    let task = env.wait_terminal(through).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    assert_eq!(task.attempts.len(), 1, "ran once: {task:?}");
    let mut after = Vec::new();
    for _ in 0..5 {
        after.push(submit_recorded(&env, &topology, &ran, 0).await?);
    }
    for id in &after {
        let task = env.wait_terminal(*id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    }
    // Every task's command ran exactly once.
    let lines = std::fs::read_to_string(&ran)?;
    let mut ids: Vec<&str> = lines.lines().collect();
    ids.sort_unstable();
    let mut expected: Vec<String> = before
        .iter()
        .chain(std::iter::once(&through))
        .chain(&after)
        .map(Uuid::to_string)
        .collect();
    expected.sort_unstable();
    assert_eq!(ids, expected, "each task ran once");

    // The process said where the store went and that it came back elsewhere, and no statement
    // ever ran on the read-only server.
    eventually_within(
        "chime up to log the store's return",
        Duration::from_secs(30),
        || {
            let log = log.clone();
            async move {
                Ok(
                    std::fs::read_to_string(&log)?
                        .contains("PostgreSQL is back, on another server"),
                )
            }
        },
    )
    .await
    .with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
    let logged = std::fs::read_to_string(&log)?;
    assert!(
        !logged.contains("read-only transaction"),
        "a statement ran on the standby:\n{logged}"
    );
    assert!(up.try_wait()?.is_none(), "chime up exited:\n{logged}");

    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await?;
    drop(listener);
    standby.destroy().await;
    primary.destroy().await;
    Ok(())
}
