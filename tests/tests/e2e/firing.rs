//! The trigger-firing service through real scheduler processes: exactly one task per
//! (trigger, scheduled time), under several instances and a kill -9.

use std::time::Duration;

use anyhow::Result;
use chime_core::schedule::ScheduleSpec;
use chime_core::store::jobs::{self, NewJob};
use chime_core::store::triggers::{self, NewTrigger};
use chime_tests::{TestEnv, eventually};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TRIGGERS: i64 = 1000;
const FIRES: i64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_trigger_fires_exactly_once_per_time_through_a_kill() -> Result<()> {
    let env = TestEnv::new().await?;
    jobs::create(
        &env.store,
        NewJob {
            name: "tick".into(),
            kind: "noop".into(),
            ..NewJob::default()
        },
    )
    .await?;
    let now: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(env.store.pool())
        .await?;
    // Whole seconds a little ahead, so every instance is up before the first fire.
    let start = jiff::Timestamp::from_second(now.to_jiff().as_second() + 4)?;
    for n in 0..TRIGGERS {
        triggers::create(
            &env.store,
            NewTrigger {
                group: None,
                name: format!("t{n}"),
                job_group: None,
                job: "tick".into(),
                schedule: ScheduleSpec::Simple {
                    interval_ms: 1000,
                    repeat_count: FIRES - 1,
                    start_time: Some(start),
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
    }
    let mut instances = vec![
        env.spawn_chime(&["scheduler"])?,
        env.spawn_chime(&["scheduler"])?,
        env.spawn_chime(&["scheduler"])?,
    ];
    // Mid-run, kill one instance without any clean-up, and start another.
    let halfway = start
        .duration_since(jiff::Timestamp::now())
        .as_secs_f64()
        .max(0.0)
        + 5.0;
    tokio::time::sleep(Duration::from_secs_f64(halfway)).await;
    let victim = instances.remove(0);
    if let Some(pid) = victim.id() {
        kill(Pid::from_raw(i32::try_from(pid)?), Signal::SIGKILL)?;
    }
    instances.push(env.spawn_chime(&["scheduler"])?);

    eventually("every trigger to complete", || async {
        let complete: i64 =
            sqlx::query_scalar("SELECT count(*) FROM triggers WHERE state = 'complete'")
                .fetch_one(env.store.pool())
                .await?;
        Ok(complete == TRIGGERS)
    })
    .await?;
    let duplicates: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT trigger_id, data_time FROM tasks
                               GROUP BY 1, 2 HAVING count(*) > 1) d",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(duplicates, 0, "no (trigger, time) fired twice");
    // No gap: each trigger made a task for each of its 10 times, start + 0 … 9 s.
    let per_trigger: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT count(*), count(DISTINCT data_time),
                count(*) FILTER (WHERE data_time NOT IN
                    (SELECT $1::timestamptz + make_interval(secs => k) FROM generate_series(0, 9) k))
         FROM tasks GROUP BY trigger_id",
    )
    .bind(jiff_sqlx::Timestamp::from(start))
    .fetch_all(env.store.pool())
    .await?;
    assert_eq!(per_trigger.len() as i64, TRIGGERS);
    assert!(
        per_trigger.iter().all(|row| *row == (FIRES, FIRES, 0)),
        "every trigger fired its 10 times exactly"
    );
    let fired: i64 = sqlx::query_scalar("SELECT count(*) FROM fired_triggers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(fired, TRIGGERS * FIRES);
    drop(instances);
    env.cleanup().await
}
