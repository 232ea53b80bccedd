//! `chime up` and `chime migrate` as real processes: start, serve, stop cleanly on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use chime_core::model::TaskStatus;
use chime_tests::{TestEnv, chime_binary, eventually, http, last_line};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chime_up_serves_and_stops_cleanly_on_sigterm() -> Result<()> {
    let env = TestEnv::new().await?;
    let mut up = tokio::process::Command::new(chime_binary()?)
        .args(["up", "--api-addr", env.settings.api_addr.as_str()])
        .env("CHIME_DATABASE_URL", &env.settings.database_url)
        .env("CHIME_AMQP_URL", &env.settings.amqp_url)
        .env("CHIME_PREFIX", &env.settings.prefix)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let ready = format!("{}/readyz", env.api_url());
    eventually("chime up to be ready", || async {
        Ok(http().get(&ready).send().await?.status().is_success())
    })
    .await?;

    let out = env.chime(&["submit", "--kind", "noop"]).await?;
    let id: Uuid = last_line(&out).parse()?;
    assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Succeeded);
    let workers = env.chime(&["workers", "--json"]).await?;
    let workers: serde_json::Value = serde_json::from_slice(&workers.stdout)?;
    assert_eq!(workers[0]["status"], "online");

    let pid = up.id().context("chime up has a pid")?;
    kill(Pid::from_raw(i32::try_from(pid)?), Signal::SIGTERM)?;
    let status = tokio::time::timeout(Duration::from_secs(30), up.wait())
        .await
        .context("chime up did not stop within 30 s of SIGTERM")??;
    assert!(status.success(), "exit status {status:?}");
    let status: String = sqlx::query_scalar("SELECT status FROM workers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(status, "offline");
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chime_migrate_creates_and_migrates_a_missing_database() -> Result<()> {
    let env = TestEnv::new().await?;
    // Point migrate at a database that does not exist yet.
    let (pg, _) = chime_tests::server_urls();
    let fresh = format!("{}_m", env.database);
    let out = tokio::process::Command::new(chime_binary()?)
        .args(["migrate", "--database-url", &format!("{pg}/{fresh}")])
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .output()
        .await?;
    assert!(out.status.success(), "{out:?}");
    let admin = sqlx::PgPool::connect(&format!("{pg}/{fresh}")).await?;
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables
         WHERE table_schema = 'public' AND table_name IN ('tasks', 'outbox', 'fired_triggers')",
    )
    .fetch_one(&admin)
    .await?;
    assert_eq!(tables, 3);
    admin.close().await;
    let root = sqlx::PgPool::connect(&format!("{pg}/postgres")).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{fresh}\" WITH (FORCE)"
    )))
    .execute(&root)
    .await?;
    root.close().await;
    env.cleanup().await
}
