//! The firing service's rules, through the running services: misfire policies, calendars,
//! paused jobs and groups, completion by repeat count and end time, non-concurrent jobs.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::schedule::CalendarSpec;
use chime_core::schedule::ScheduleSpec;
use chime_core::schedule::misfire::MisfirePolicy;
use chime_core::store::calendars::{self, NamedCalendar};
use chime_core::store::jobs::{self, NewJob};
use chime_core::store::triggers::{self, NewTrigger, Target};
use chime_tests::{TestEnv, eventually};
use jiff::{SignedDuration, Timestamp};

async fn db_now(env: &TestEnv) -> Result<Timestamp> {
    let now: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(env.store.pool())
        .await?;
    Ok(now.to_jiff())
}

async fn job(env: &TestEnv, name: &str, concurrent: bool, sleep_ms: u64) -> Result<()> {
    env.noop_job(name, concurrent, sleep_ms).await
}

async fn trigger(
    env: &TestEnv,
    name: &str,
    job: &str,
    schedule: ScheduleSpec,
    calendar: Option<&str>,
    policy: Option<MisfirePolicy>,
) -> Result<()> {
    triggers::create(
        &env.store,
        NewTrigger {
            group: None,
            name: name.into(),
            job_group: None,
            job: job.into(),
            schedule,
            calendar: calendar.map(str::to_owned),
            misfire_policy: policy,
            priority: None,
            description: None,
            data: serde_json::Value::Null,
        },
    )
    .await?;
    Ok(())
}

fn cron(expr: &str, start: Option<Timestamp>, end: Option<Timestamp>) -> ScheduleSpec {
    ScheduleSpec::Cron {
        cron: expr.into(),
        time_zone: None,
        start_time: start,
        end_time: end,
    }
}

/// (tasks, times_triggered, state, next_fire_time) of a trigger.
async fn trigger_state(env: &TestEnv, name: &str) -> Result<(i64, i64, String, Option<Timestamp>)> {
    let (tasks, times, state, next): (i64, i64, String, Option<jiff_sqlx::Timestamp>) =
        sqlx::query_as(
            "SELECT (SELECT count(*) FROM tasks k WHERE k.trigger_id = t.id),
                    t.times_triggered, t.state, t.next_fire_time
             FROM triggers t WHERE t.name = $1",
        )
        .bind(name)
        .fetch_one(env.store.pool())
        .await?;
    Ok((tasks, times, state, next.map(|t| t.to_jiff())))
}

/// The data time of a trigger's first task.
async fn first_fire(env: &TestEnv, name: &str) -> Result<Timestamp> {
    let first: jiff_sqlx::Timestamp = sqlx::query_scalar(
        "SELECT min(k.data_time) FROM tasks k JOIN triggers t ON t.id = k.trigger_id
         WHERE t.name = $1",
    )
    .bind(name)
    .fetch_one(env.store.pool())
    .await?;
    Ok(first.to_jiff())
}

/// How many of a trigger's tasks are for a time before `before`: fires of missed slots. (A
/// slot after it is the trigger's regular next fire, which a slow run may reach: the test must
/// not depend on whether a minute turned while it ran.)
async fn fired_before(env: &TestEnv, name: &str, before: Timestamp) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM tasks k JOIN triggers t ON t.id = k.trigger_id
         WHERE t.name = $1 AND k.data_time < $2",
    )
    .bind(name)
    .bind(jiff_sqlx::Timestamp::from(before))
    .fetch_one(env.store.pool())
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_misfire_policy_through_the_service() -> Result<()> {
    let mut env = TestEnv::new().await?;
    job(&env, "j", true, 0).await?;
    let now = db_now(&env).await?;
    // Every minute at :00, since 10 minutes ago: every fire so far is long past the 60 s
    // threshold when the scheduler first sees it.
    let since = Some(Timestamp::from_second(now.as_second() - 600)?);
    let hourly_far = cron("0 0 0 * * ?", since, None);
    let every_minute = cron("0 * * * * ?", since, None);
    trigger(
        &env,
        "fire-now",
        "j",
        every_minute.clone(),
        None,
        Some(MisfirePolicy::FireNow),
    )
    .await?;
    trigger(
        &env,
        "skip",
        "j",
        every_minute.clone(),
        None,
        Some(MisfirePolicy::Skip),
    )
    .await?;
    trigger(
        &env,
        "fire-all",
        "j",
        every_minute,
        None,
        Some(MisfirePolicy::FireAll),
    )
    .await?;
    trigger(
        &env,
        "daily-skip",
        "j",
        hourly_far,
        None,
        Some(MisfirePolicy::Skip),
    )
    .await?;
    let simple = |_: ()| ScheduleSpec::Simple {
        interval_ms: 60_000,
        repeat_count: 20,
        start_time: since,
        end_time: None,
    };
    trigger(
        &env,
        "now-existing",
        "j",
        simple(()),
        None,
        Some(MisfirePolicy::RescheduleNowWithExistingCount),
    )
    .await?;
    trigger(
        &env,
        "next-remaining",
        "j",
        simple(()),
        None,
        Some(MisfirePolicy::RescheduleNextWithRemainingCount),
    )
    .await?;
    trigger(
        &env,
        "now-remaining",
        "j",
        simple(()),
        None,
        Some(MisfirePolicy::RescheduleNowWithRemainingCount),
    )
    .await?;
    trigger(
        &env,
        "next-existing",
        "j",
        simple(()),
        None,
        Some(MisfirePolicy::RescheduleNextWithExistingCount),
    )
    .await?;
    trigger(
        &env,
        "smart-cron",
        "j",
        cron("0 * * * * ?", since, None),
        None,
        Some(MisfirePolicy::Smart),
    )
    .await?;
    env.start(Services::SCHEDULER).await?;

    // fire_now: one fire now (not at a missed minute), then on to the next minute.
    eventually("fire_now to fire", || async {
        Ok(trigger_state(&env, "fire-now").await?.0 >= 1)
    })
    .await?;
    assert!(first_fire(&env, "fire-now").await? >= now);
    // fire_all: every missed minute (10 or 11 of them), back to back.
    eventually("fire_all to catch up", || async {
        Ok(trigger_state(&env, "fire-all").await?.0 >= 10)
    })
    .await?;
    // reschedule_now_with_existing_count: fires now, restarts its grid at now.
    eventually("reschedule-now to fire", || async {
        Ok(trigger_state(&env, "now-existing").await?.0 >= 1)
    })
    .await?;
    assert!(first_fire(&env, "now-existing").await? >= now);
    // reschedule_next_with_remaining_count: no fire now; the missed slots count as fired.
    eventually("reschedule-next to be rescheduled", || async {
        Ok(trigger_state(&env, "next-remaining").await?.1 >= 10)
    })
    .await?;
    let (_, _, _, next) = trigger_state(&env, "skip").await?;
    assert_eq!(
        fired_before(&env, "skip", now).await?,
        0,
        "skip fires none of what it missed"
    );
    assert!(
        next.is_some_and(|n| n > now),
        "skip continues after now: {next:?}"
    );
    let (_, _, _, next) = trigger_state(&env, "fire-now").await?;
    assert!(next.is_some_and(|n| n > now && n.as_second() % 60 == 0));
    let data_times: Vec<jiff_sqlx::Timestamp> = sqlx::query_scalar(
        "SELECT k.data_time FROM tasks k JOIN triggers t ON t.id = k.trigger_id
         WHERE t.name = 'fire-all' ORDER BY k.data_time",
    )
    .fetch_all(env.store.pool())
    .await?;
    assert!(
        data_times.windows(2).all(|w| w[1].to_jiff().duration_since(w[0].to_jiff()) == SignedDuration::from_secs(60)),
        "fire_all fired each missed minute once"
    );
    let (_, _, _, next) = trigger_state(&env, "next-remaining").await?;
    let after = db_now(&env).await?;
    assert_eq!(fired_before(&env, "next-remaining", now).await?, 0);
    assert!(next.is_some_and(|n| n > now && n <= after + SignedDuration::from_secs(60)));
    let (tasks, times, ..) = trigger_state(&env, "daily-skip").await?;
    assert_eq!(fired_before(&env, "daily-skip", now).await?, 0);
    assert_eq!(times, tasks, "daily-skip counts only what it fired");
    // reschedule_now_with_remaining_count fires now; so does smart for a cron trigger.
    for name in ["now-remaining", "smart-cron"] {
        eventually(&format!("{name} to fire now"), || async {
            Ok(trigger_state(&env, name).await?.0 >= 1)
        })
        .await?;
        assert!(first_fire(&env, name).await? >= now, "{name}");
    }
    // reschedule_next_with_existing_count: no fire now, and the missed slots are not counted.
    let (tasks, times, _, next) = trigger_state(&env, "next-existing").await?;
    assert_eq!(fired_before(&env, "next-existing", now).await?, 0);
    assert_eq!(times, tasks, "next-existing counts only what it fired");
    assert!(next.is_some_and(|n| n > now));
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeat_count_and_end_time_complete_the_trigger() -> Result<()> {
    let mut env = TestEnv::new().await?;
    job(&env, "j", true, 0).await?;
    let now = db_now(&env).await?;
    let start = Timestamp::from_second(now.as_second() + 2)?;
    trigger(
        &env,
        "thrice",
        "j",
        ScheduleSpec::Simple {
            interval_ms: 300,
            repeat_count: 2,
            start_time: Some(start),
            end_time: None,
        },
        None,
        None,
    )
    .await?;
    trigger(
        &env,
        "until",
        "j",
        cron(
            "* * * * * ?",
            Some(start),
            Some(start + SignedDuration::from_millis(2500)),
        ),
        None,
        None,
    )
    .await?;
    env.start(Services::SCHEDULER).await?;
    for (name, fires) in [("thrice", 3), ("until", 3)] {
        eventually(&format!("{name} to complete"), || async {
            Ok(trigger_state(&env, name).await?.2 == "complete")
        })
        .await?;
        let (tasks, times, _, next) = trigger_state(&env, name).await?;
        assert_eq!((tasks, times, next), (fires, fires, None), "{name}");
    }
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendars_and_paused_jobs_and_groups_hold_fires() -> Result<()> {
    let mut env = TestEnv::new().await?;
    job(&env, "j", true, 0).await?;
    job(&env, "k", true, 0).await?;
    calendars::create(
        env.store.pool(),
        NamedCalendar {
            name: "first-half".into(),
            description: String::new(),
            definition: CalendarSpec::Cron {
                cron: "0-29 * * * * ?".into(),
                time_zone: None,
                base: None,
            },
        },
        None,
    )
    .await?;
    let every_second = cron("* * * * * ?", None, None);
    trigger(
        &env,
        "calendar",
        "j",
        every_second.clone(),
        Some("first-half"),
        None,
    )
    .await?;
    trigger(&env, "job-paused", "k", every_second.clone(), None, None).await?;
    triggers::create(
        &env.store,
        NewTrigger {
            group: Some("quiet".into()),
            name: "group-paused".into(),
            job_group: None,
            job: "k".into(),
            schedule: every_second,
            calendar: None,
            misfire_policy: Some(MisfirePolicy::Skip),
            priority: None,
            description: None,
            data: serde_json::Value::Null,
        },
    )
    .await?;
    triggers::pause(&env.store, Target::Job("default", "k")).await?;
    triggers::pause(&env.store, Target::Group("quiet")).await?;
    env.start(Services::SCHEDULER).await?;
    eventually("the calendar trigger to fire a few times", || async {
        Ok(trigger_state(&env, "calendar").await?.0 >= 3)
    })
    .await?;
    // No fire in the calendar's excluded seconds.
    let excluded: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tasks k JOIN triggers t ON t.id = k.trigger_id
         WHERE t.name = 'calendar' AND extract(second FROM k.data_time) < 30",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(excluded, 0);
    for name in ["job-paused", "group-paused"] {
        let (tasks, _, state, _) = trigger_state(&env, name).await?;
        assert_eq!((tasks, state.as_str()), (0, "paused"), "{name}");
    }
    // Resumed, they fire again.
    triggers::resume(&env.store, Target::Job("default", "k")).await?;
    triggers::resume(&env.store, Target::Group("quiet")).await?;
    for name in ["job-paused", "group-paused"] {
        eventually(&format!("{name} to fire after its resume"), || async {
            Ok(trigger_state(&env, name).await?.0 >= 1)
        })
        .await?;
    }
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_concurrent_job_holds_fires_while_a_task_runs() -> Result<()> {
    let mut env = TestEnv::new().await?;
    // Fires every second; each task takes 1.5 s.
    job(&env, "slow", false, 1500).await?;
    trigger(
        &env,
        "often",
        "slow",
        cron("* * * * * ?", None, None),
        None,
        None,
    )
    .await?;
    env.start(Services::ALL).await?;
    eventually("three runs to finish", || async {
        let done: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE status = 'succeeded'")
            .fetch_one(env.store.pool())
            .await?;
        Ok(done >= 3)
    })
    .await?;
    env.stop().await?;
    // Never two at once: each run starts after the previous one finished.
    let runs: Vec<(jiff_sqlx::Timestamp, Option<jiff_sqlx::Timestamp>)> = sqlx::query_as(
        "SELECT started_at, finished_at FROM tasks WHERE started_at IS NOT NULL ORDER BY started_at",
    )
    .fetch_all(env.store.pool())
    .await?;
    for pair in runs.windows(2) {
        let previous_end = pair[0].1.map(|t| t.to_jiff());
        assert!(
            previous_end.is_some_and(|end| pair[1].0.to_jiff() >= end),
            "runs overlap: {:?} then {:?}",
            (pair[0].0.to_jiff(), previous_end),
            pair[1].0.to_jiff()
        );
    }
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retrying_task_is_released_as_its_next_attempt() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let topology = chime_core::bus::Topology::new(env.settings.prefix.clone());
    let submitted = chime_core::store::task_lifecycle::submit(
        &env.store,
        &topology,
        chime_core::model::NewTask {
            kind: "noop".into(),
            ..Default::default()
        },
    )
    .await?;
    // As a worker leaves a failed attempt with budget left (the worker side is issue 5's).
    sqlx::query(
        "UPDATE tasks SET status = 'retrying', failures = 1,
                next_attempt_at = now() + interval '1 second' WHERE id = $1",
    )
    .bind(submitted.id)
    .execute(env.store.pool())
    .await?;
    env.start(Services::ALL).await?;
    let task = env
        .wait_status(submitted.id, chime_core::model::TaskStatus::Succeeded)
        .await?;
    // Attempt 1's message was dropped (the task was not ready for it); attempt 2 ran.
    assert_eq!(task.attempt, 2);
    assert_eq!(task.attempts.len(), 1);
    assert_eq!(task.attempts[0].attempt, 2);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_of_a_vanished_worker_are_rerun_or_lost_as_their_job_says() -> Result<()> {
    let mut env = TestEnv::new().await?;
    for (name, recovery) in [("recover", true), ("no-recover", false)] {
        jobs::create(
            &env.store,
            NewJob {
                name: name.into(),
                kind: "noop".into(),
                requests_recovery: Some(recovery),
                ..NewJob::default()
            },
        )
        .await?;
    }
    // A worker that stopped heart-beating an hour ago, with an attempt of each job running.
    let ghost = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO workers (id, name, host, pid, groups, kinds, concurrency, status, version,
                              last_heartbeat)
         VALUES ($1, 'ghost', 'gone', 1, '{default}', '{noop}', 1, 'online', 'test',
                 now() - interval '1 hour')",
    )
    .bind(ghost)
    .execute(env.store.pool())
    .await?;
    let mut ids = Vec::new();
    for name in ["recover", "no-recover"] {
        let id = uuid::Uuid::now_v7();
        sqlx::query(
            "WITH task AS (
                 INSERT INTO tasks (id, job_id, kind, spec, worker_group, status, attempt,
                                    requests_recovery, worker_id, started_at)
                 SELECT $1, j.id, j.kind, j.spec, j.worker_group, 'running', 1,
                        j.requests_recovery, $2, now() - interval '1 hour'
                 FROM jobs j WHERE j.name = $3)
             INSERT INTO task_attempts (task_id, attempt, worker_id, worker_name)
             VALUES ($1, 1, $2, 'ghost')",
        )
        .bind(id)
        .bind(ghost)
        .bind(name)
        .execute(env.store.pool())
        .await?;
        ids.push(id);
    }
    env.start(Services::ALL).await?;
    let rerun = env
        .wait_status(ids[0], chime_core::model::TaskStatus::Succeeded)
        .await?;
    assert_eq!(rerun.attempt, 2);
    assert_eq!(
        rerun.attempts[0].outcome,
        Some(chime_core::model::AttemptOutcome::Lost)
    );
    let lost = env
        .wait_status(ids[1], chime_core::model::TaskStatus::Failed)
        .await?;
    assert_eq!(lost.reason.as_deref(), Some("lost"));
    assert_eq!(lost.attempts.len(), 1);
    assert_eq!(
        lost.attempts[0].outcome,
        Some(chime_core::model::AttemptOutcome::Lost)
    );
    env.cleanup().await
}
