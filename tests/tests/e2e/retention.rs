//! History that does not grow for ever: `chime prune` removes ended tasks (with their attempts)
//! and fired-trigger rows older than its cut, and nothing that still lives or is still needed.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_tests::{TestEnv, last_line};
use uuid::Uuid;

/// A UUIDv7 from `days_ago` days back, as a task created then would have.
fn id_from(days_ago: i64) -> Result<Uuid> {
    let at = jiff::Timestamp::now().checked_sub(jiff::SignedDuration::from_hours(24 * days_ago))?;
    let ms = u64::try_from(at.as_millisecond())?;
    let random: [u8; 10] = *Uuid::now_v7().as_bytes().last_chunk().unwrap_or(&[7; 10]);
    Ok(uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid())
}

async fn task(env: &TestEnv, days_ago: i64, status: &str, job: Option<&str>) -> Result<Uuid> {
    let id = id_from(days_ago)?;
    let age = 24.0 * 3600.0 * days_ago as f64;
    task_made(env, id, age, status, job, "2026-01-01T00:00:00Z").await
}

/// A task with this id, made `age_s` seconds ago, for `data_time`, with one attempt.
async fn task_made(
    env: &TestEnv,
    id: Uuid,
    age_s: f64,
    status: &str,
    job: Option<&str>,
    data_time: &str,
) -> Result<Uuid> {
    sqlx::query(
        "INSERT INTO tasks (id, job_id, kind, spec, worker_group, status, created_at, finished_at,
                            data_time)
         VALUES ($1, (SELECT id FROM jobs WHERE name = $3), 'noop', '{}', 'default', $2,
                 now() - make_interval(secs => $4), now() - make_interval(secs => $4),
                 $5::timestamptz)",
    )
    .bind(id)
    .bind(status)
    .bind(job)
    .bind(age_s)
    .bind(data_time)
    .execute(env.store.pool())
    .await?;
    sqlx::query("INSERT INTO task_attempts (task_id, attempt, outcome) VALUES ($1, 1, NULL)")
        .bind(id)
        .execute(env.store.pool())
        .await?;
    Ok(id)
}

async fn exists(env: &TestEnv, id: Uuid) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tasks WHERE id = $1)")
            .bind(id)
            .fetch_one(env.store.pool())
            .await?,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_old_ended_history_and_nothing_alive_or_needed() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    for name in ["plain", "up", "down"] {
        env.noop_job(name, true, 0).await?;
    }
    let out = env.chime(&["job", "depend", "down", "--on", "up"]).await?;
    anyhow::ensure!(out.status.success(), "{out:?}");

    let old_succeeded = task(&env, 40, "succeeded", Some("plain")).await?;
    let old_failed = task(&env, 40, "failed", None).await?;
    let old_running = task(&env, 40, "running", Some("plain")).await?;
    let old_retrying = task(&env, 40, "retrying", None).await?;
    // A waiting downstream task still needs its upstream's old success.
    let old_waiting = task(&env, 40, "waiting", Some("down")).await?;
    let needed_upstream = task(&env, 40, "succeeded", Some("up")).await?;
    let recent = task(&env, 2, "succeeded", Some("plain")).await?;
    // Only the upstream run the waiting task's data time needs is kept, not the job's history.
    let not_needed_upstream = task_made(
        &env,
        id_from(40)?,
        40.0 * 86_400.0,
        "succeeded",
        Some("up"),
        "2025-12-01T00:00:00Z",
    )
    .await?;
    // Age is the time a task was made, not its id: a caller's UUIDv4 sorts anywhere.
    let young_low_id = task_made(
        &env,
        "00000000-0b1e-4c3a-9d2e-5f6a7b8c9d0e".parse()?,
        2.0,
        "succeeded",
        None,
        "2026-01-01T00:00:00Z",
    )
    .await?;
    let old_high_id = task_made(
        &env,
        "ffffffff-0b1e-4c3a-9d2e-5f6a7b8c9d0e".parse()?,
        40.0 * 86_400.0,
        "succeeded",
        None,
        "2026-01-01T00:00:00Z",
    )
    .await?;
    for (task_id, days) in [
        (Some(old_succeeded), 40),
        (Some(old_running), 40),
        (None, 2),
    ] {
        sqlx::query(
            "INSERT INTO fired_triggers (task_id, instance_id, sched_time, fired_time)
             VALUES ($1, 'i', now() - make_interval(days => $2), now() - make_interval(days => $2))",
        )
        .bind(task_id)
        .bind(days)
        .execute(env.store.pool())
        .await?;
    }

    let dry = env
        .chime(&["prune", "--older-than", "30d", "--dry-run"])
        .await?;
    assert!(dry.status.success(), "{dry:?}");
    assert_eq!(
        last_line(&dry),
        "would remove 4 ended task(s) and 1 fired-trigger row(s)"
    );
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(
        said.contains(&format!(
            "keeps 1 ended task(s) of default.up: waiting task {old_waiting} (default.down, \
             data time 2026-01-01T00:00:00Z) needs them"
        )),
        "the dry run says what is kept and why: {said}"
    );
    assert!(
        exists(&env, old_succeeded).await?,
        "a dry run removed something"
    );

    let out = env.chime(&["prune", "--older-than", "30d"]).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        last_line(&out),
        "removed 4 ended task(s) and 1 fired-trigger row(s)"
    );
    for gone in [old_succeeded, old_failed, not_needed_upstream, old_high_id] {
        assert!(!exists(&env, gone).await?, "{gone} was kept");
    }
    for kept in [
        old_running,
        old_retrying,
        old_waiting,
        needed_upstream,
        recent,
        young_low_id,
    ] {
        assert!(exists(&env, kept).await?, "{kept} was removed");
    }
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM task_attempts")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(attempts, 6, "the pruned tasks' attempts went with them");
    let fires: i64 = sqlx::query_scalar("SELECT count(*) FROM fired_triggers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(fires, 2, "the running task's fire and the recent one stay");
    let bad = env.chime(&["prune", "--older-than", "7"]).await?;
    assert!(!bad.status.success());
    env.cleanup().await
}

/// The hourly pass keeps each job's tasks for the job's own `retention_days`, longer or shorter
/// than the installation's, and everything else for the installation's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_keeps_its_history_for_its_own_retention() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    for (name, days) in [("short", Some("2")), ("long", Some("60")), ("plain", None)] {
        let mut args = vec!["job", "create", name, "--kind", "noop"];
        if let Some(days) = days {
            args.extend(["--retention-days", days]);
        }
        let out = env.chime(&args).await?;
        anyhow::ensure!(out.status.success(), "{out:?}");
    }
    let short_old = task(&env, 5, "succeeded", Some("short")).await?;
    let short_new = task(&env, 1, "succeeded", Some("short")).await?;
    let long_kept = task(&env, 40, "succeeded", Some("long")).await?;
    let long_old = task(&env, 70, "failed", Some("long")).await?;
    let plain_old = task(&env, 40, "succeeded", Some("plain")).await?;
    let plain_kept = task(&env, 10, "succeeded", Some("plain")).await?;
    let adhoc_old = task(&env, 40, "succeeded", None).await?;

    let report = chime_core::store::retention::prune_by_policy(&env.store, 30).await?;
    assert_eq!(report.tasks, 4, "{report:?}");
    for gone in [short_old, long_old, plain_old, adhoc_old] {
        assert!(!exists(&env, gone).await?, "{gone} was kept");
    }
    for kept in [short_new, long_kept, plain_kept] {
        assert!(exists(&env, kept).await?, "{kept} was removed");
    }
    let bad = env
        .chime(&[
            "job",
            "create",
            "zero",
            "--kind",
            "noop",
            "--retention-days",
            "0",
        ])
        .await?;
    assert!(!bad.status.success(), "{bad:?}");
    env.cleanup().await
}
