//! The dependency service through the running services: DAGs of jobs per data time, `same` and
//! `period` windows, upstream-failure policies, backfills, exactly-once advancing, and the
//! refusals (cycles, deleting an upstream).

use anyhow::{Result, ensure};
use chime_cli::commands::services::Services;
use chime_core::bus::{Topology, publish_confirmed};
use chime_core::model::{TaskStatus, TaskView};
use chime_tests::{TestEnv, eventually};
use lapin::options::ConfirmSelectOptions;
use lapin::types::FieldTable;
use uuid::Uuid;

const UP: Services = Services::ALL;

/// Every task of a job, by data time then creation.
async fn tasks_of(env: &TestEnv, job: &str) -> Result<Vec<TaskView>> {
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT t.id FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.name = $1
         ORDER BY t.data_time, t.id",
    )
    .bind(job)
    .fetch_all(env.store.pool())
    .await?;
    let mut tasks = Vec::new();
    for id in ids {
        tasks.push(env.task(id).await?);
    }
    Ok(tasks)
}

/// Waits until `job` has `n` tasks, all ended.
async fn wait_ended(env: &TestEnv, job: &str, n: usize) -> Result<Vec<TaskView>> {
    eventually(&format!("{n} ended tasks of {job}"), || async {
        let tasks = tasks_of(env, job).await?;
        Ok(tasks.len() >= n && tasks.iter().all(|t| t.status.is_terminal()))
    })
    .await?;
    tasks_of(env, job).await
}

fn data_times(tasks: &[TaskView]) -> Vec<Option<jiff::Timestamp>> {
    tasks.iter().map(|t| t.data_time).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diamond_completes_per_data_time_exactly_once_with_two_services() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    // A second dependency service: each (job, data time) must still advance once.
    env.start(Services::DEPENDENCY).await?;
    for job in ["a", "b", "c", "d"] {
        env.chime_ok(&[
            "job",
            "create",
            job,
            "--kind",
            "shell",
            "--script",
            "sleep 0.2",
        ])
        .await?;
    }
    for (job, upstream) in [("b", "a"), ("c", "a"), ("d", "b"), ("d", "c")] {
        env.chime_ok(&["job", "depend", job, "--on", upstream])
            .await?;
    }
    let times = [
        "2026-03-01T00:00:00Z",
        "2026-03-02T00:00:00Z",
        "2026-03-03T00:00:00Z",
    ];
    for t in times {
        env.chime_ok(&["job", "run", "a", "--data-time", t]).await?;
    }
    let d = wait_ended(&env, "d", 3).await?;
    let b = wait_ended(&env, "b", 3).await?;
    let c = wait_ended(&env, "c", 3).await?;
    let expected: Vec<Option<jiff::Timestamp>> = times.iter().map(|t| t.parse().ok()).collect();
    assert_eq!(data_times(&d), expected);
    for ((d, b), c) in d.iter().zip(&b).zip(&c) {
        assert_eq!(d.status, TaskStatus::Succeeded);
        let d_started = d.attempts[0].started_at;
        for upstream in [b, c] {
            assert_eq!(upstream.data_time, d.data_time);
            let finished = upstream.finished_at.expect("an ended upstream");
            assert!(d_started >= finished, "d ran before its upstream ended");
        }
    }

    // Every event again (duplicates): nothing new may be created.
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let topology = Topology::new(env.settings.prefix.clone());
    for job in ["a", "b", "c"] {
        for task in tasks_of(&env, job).await? {
            let event = serde_json::json!({
                "v": 1, "task_id": task.id, "attempt": task.attempt, "status": "succeeded",
                "group": task.group, "job_id": task.job.as_ref().map(|j| j.id),
                "data_time": task.data_time, "reason": null, "at": task.finished_at,
            });
            // Under the key by which the relay sends a job's events to the dependency service.
            let body = serde_json::to_string(&event)?;
            let key = topology
                .dependency_routing_key(&format!("task.succeeded.{}", task.group), &body)
                .ok_or_else(|| anyhow::anyhow!("a job's event has no dependency routing key"))?;
            publish_confirmed(
                &channel,
                &topology.events_exchange(),
                &key,
                body.as_bytes(),
                FieldTable::default(),
            )
            .await?;
        }
    }
    let queue = topology.dependencies_queue();
    eventually("the duplicate events to be handled", || async {
        Ok(chime_tests::queue_depth(&channel, &queue).await? == 0)
    })
    .await?;
    // Handled includes acked: the advance (or its refusal) has committed by then.
    eventually("no unacked duplicate", || async {
        let advances: i64 = sqlx::query_scalar("SELECT count(*) FROM dependency_advances")
            .fetch_one(env.store.pool())
            .await?;
        Ok(advances == 9)
    })
    .await?;
    // Stopped first, so that every duplicate was either acted on or went back to the queue:
    // none is still in hand when the tasks are counted.
    env.stop().await?;
    for job in ["b", "c", "d"] {
        assert_eq!(tasks_of(&env, job).await?.len(), 3, "tasks of {job}");
    }
    let _ = conn.close(200, "done".into()).await;
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daily_job_waits_for_all_24_hourly_runs_of_its_day() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    env.chime_ok(&[
        "job",
        "create",
        "hourly",
        "--kind",
        "noop",
        "--data-time-period",
        "hour",
    ])
    .await?;
    env.chime_ok(&[
        "trigger",
        "create",
        "every-hour",
        "--job",
        "hourly",
        "--schedule",
        r#"{"kind":"cron","cron":"0 0 * * * ?","time_zone":"UTC"}"#,
    ])
    .await?;
    env.chime_ok(&[
        "job",
        "create",
        "daily",
        "--kind",
        "noop",
        "--data-time-period",
        "day",
    ])
    .await?;
    env.chime_ok(&[
        "job", "depend", "daily", "--on", "hourly", "--window", "period",
    ])
    .await?;
    let out = env
        .chime_ok(&[
            "backfill",
            "hourly",
            "--from",
            "2026-01-05T00:00:00Z",
            "--to",
            "2026-01-05T23:59:59Z",
            "--parallelism",
            "4",
        ])
        .await?;
    assert!(out.ends_with("24 tasks"), "{out}");
    let hourly = wait_ended(&env, "hourly", 24).await?;
    let daily = wait_ended(&env, "daily", 1).await?;
    assert_eq!(daily.len(), 1);
    assert_eq!(daily[0].status, TaskStatus::Succeeded);
    assert_eq!(daily[0].data_time, "2026-01-05T00:00:00Z".parse().ok());
    let last_hour = hourly
        .iter()
        .filter_map(|t| t.finished_at)
        .max()
        .expect("hourly runs ended");
    assert!(daily[0].attempts[0].started_at >= last_hour);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failure_fails_or_waits_for_a_rerun() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let flag = std::env::temp_dir().join(format!("chime-flag-{}", Uuid::now_v7()));
    let script = format!("test -f {}", flag.display());
    env.chime_ok(&[
        "job", "create", "up", "--kind", "shell", "--script", &script,
    ])
    .await?;
    for job in ["failing", "after-failing", "patient", "blocked"] {
        env.chime_ok(&["job", "create", job, "--kind", "noop"])
            .await?;
    }
    // `blocked` has no trigger: its run is made when its upstream is done, or blocked.
    env.chime_ok(&[
        "job",
        "depend",
        "blocked",
        "--on",
        "up",
        "--on-upstream-failure",
        "wait",
    ])
    .await?;
    env.chime_ok(&["job", "depend", "failing", "--on", "up"])
        .await?;
    env.chime_ok(&["job", "depend", "after-failing", "--on", "failing"])
        .await?;
    env.chime_ok(&[
        "job",
        "depend",
        "patient",
        "--on",
        "up",
        "--on-upstream-failure",
        "wait",
    ])
    .await?;
    // `patient` makes its own task (a trigger firing once at the data time), which must wait.
    let at = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(2))?
        .round(jiff::Unit::Second)?;
    let schedule =
        format!(r#"{{"kind":"simple","interval_ms":1000,"repeat_count":0,"start_time":"{at}"}}"#);
    env.chime_ok(&[
        "trigger",
        "create",
        "once",
        "--job",
        "patient",
        "--schedule",
        &schedule,
    ])
    .await?;
    let up = env
        .chime_ok(&["job", "run", "up", "--data-time", &at.to_string()])
        .await?;
    let up: Uuid = up.parse()?;
    assert_eq!(env.wait_terminal(up).await?.status, TaskStatus::Failed);

    // fail: the downstream fails, and so does its own downstream.
    for job in ["failing", "after-failing"] {
        let tasks = wait_ended(&env, job, 1).await?;
        assert_eq!(tasks[0].status, TaskStatus::Failed, "{job}");
        assert_eq!(tasks[0].reason.as_deref(), Some("upstream_failed"), "{job}");
        assert!(tasks[0].attempts.is_empty(), "{job} never ran");
    }
    // wait: the downstream's own task waits, and says on what.
    eventually("patient's task to be waiting", || async {
        Ok(tasks_of(&env, "patient").await?.len() == 1)
    })
    .await?;
    let patient = tasks_of(&env, "patient").await?.remove(0);
    assert_eq!(patient.status, TaskStatus::Waiting);
    let show = env
        .chime(&["task", "show", &patient.id.to_string(), "--json"])
        .await?;
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout)?;
    assert_eq!(shown["waiting_on"][0]["upstream"], "default.up", "{shown}");
    assert_eq!(
        shown["waiting_on"][0]["state"], "failed; waiting for a rerun",
        "{shown}"
    );
    // A job without a trigger of its own has its blocked run as a waiting task that says why.
    eventually("blocked's task to be waiting", || async {
        Ok(tasks_of(&env, "blocked").await?.len() == 1)
    })
    .await?;
    let blocked = tasks_of(&env, "blocked").await?.remove(0);
    assert_eq!(blocked.status, TaskStatus::Waiting);
    assert_eq!(blocked.data_time, Some(at));
    let show = env
        .chime(&["task", "show", &blocked.id.to_string(), "--json"])
        .await?;
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout)?;
    assert_eq!(
        shown["waiting_on"][0]["state"], "failed; waiting for a rerun",
        "{shown}"
    );

    // The upstream re-run succeeds: the waiting downstream runs.
    std::fs::write(&flag, "")?;
    env.chime_ok(&["task", "rerun", &up.to_string()]).await?;
    let up = env.wait_terminal(up).await?;
    assert_eq!(up.status, TaskStatus::Succeeded);
    assert_eq!(up.attempt, 2);
    let patient = env.wait_terminal(patient.id).await?;
    assert_eq!(patient.status, TaskStatus::Succeeded);
    let blocked = env.wait_terminal(blocked.id).await?;
    assert_eq!(blocked.status, TaskStatus::Succeeded);
    let _ = std::fs::remove_file(&flag);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seven_day_backfill_runs_serially_and_advances_its_downstream() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let daily = r#"{"kind":"cron","cron":"0 0 0 * * ?","time_zone":"UTC"}"#;
    for job in ["load", "report"] {
        env.chime_ok(&[
            "job",
            "create",
            job,
            "--kind",
            "noop",
            "--spec",
            r#"{"sleep_ms": 100}"#,
            "--data-time-period",
            "day",
        ])
        .await?;
        env.chime_ok(&[
            "trigger",
            "create",
            &format!("{job}-daily"),
            "--job",
            job,
            "--schedule",
            daily,
        ])
        .await?;
    }
    env.chime_ok(&["job", "depend", "report", "--on", "load"])
        .await?;
    let out = env
        .chime_ok(&[
            "backfill",
            "load",
            "--from",
            "2026-02-01T00:00:00Z",
            "--to",
            "2026-02-07T00:00:00Z",
            "--with-downstream",
        ])
        .await?;
    assert!(out.ends_with("7 tasks"), "{out}");
    let load = wait_ended(&env, "load", 7).await?;
    let report = wait_ended(&env, "report", 7).await?;
    let expected: Vec<Option<jiff::Timestamp>> = (1..=7)
        .map(|d| format!("2026-02-{d:02}T00:00:00Z").parse().ok())
        .collect();
    assert_eq!(data_times(&load), expected);
    assert_eq!(data_times(&report), expected);
    assert!(
        load.iter()
            .chain(&report)
            .all(|t| t.status == TaskStatus::Succeeded)
    );
    // Serial: each day's load started after the previous one ended.
    for pair in load.windows(2) {
        let previous_end = pair[0].finished_at.expect("ended");
        assert!(
            pair[1].attempts[0].started_at >= previous_end,
            "backfill overlapped"
        );
    }
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_and_deleting_an_upstream_are_refused() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    for job in ["x", "y", "z"] {
        env.chime_ok(&["job", "create", job, "--kind", "noop"])
            .await?;
    }
    env.chime_ok(&["job", "depend", "y", "--on", "x"]).await?;
    env.chime_ok(&["job", "depend", "z", "--on", "y"]).await?;
    let cycle = env.chime(&["job", "depend", "x", "--on", "z"]).await?;
    assert!(!cycle.status.success());
    let stderr = String::from_utf8_lossy(&cycle.stderr);
    assert!(
        stderr.contains("error:")
            && stderr.contains("cycle: default.x → default.z → default.y → default.x"),
        "{stderr}"
    );
    let itself = env.chime(&["job", "depend", "x", "--on", "x"]).await?;
    assert!(!itself.status.success());

    let delete = env.chime(&["job", "delete", "x"]).await?;
    assert!(!delete.status.success());
    let stderr = String::from_utf8_lossy(&delete.stderr);
    assert!(stderr.contains("default.y"), "{stderr}");
    let edges: i64 = sqlx::query_scalar("SELECT count(*) FROM job_dependencies")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(edges, 2, "the refused calls changed nothing");
    env.chime_ok(&["job", "delete", "x", "--force"]).await?;
    let edges: i64 = sqlx::query_scalar("SELECT count(*) FROM job_dependencies")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(edges, 1);
    env.cleanup().await
}

/// A job run by hand for a data time inside the job's period runs for the period's start, as a
/// fire would (a daily job run for 13:45 runs for midnight, so its daily downstream is met), and
/// records who ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_run_by_hand_runs_for_its_period_and_records_who_ran_it() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    env.chime_ok(&[
        "job",
        "create",
        "daily",
        "--kind",
        "noop",
        "--data-time-period",
        "day",
    ])
    .await?;
    env.chime_ok(&["job", "run", "daily", "--data-time", "2026-03-01T13:45:00Z"])
        .await?;
    let period: Option<String> = sqlx::query_scalar("SELECT data_time_period FROM jobs")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(period.as_deref(), Some("day"));
    let (data_time, submit_user): (Option<jiff_sqlx::Timestamp>, Option<String>) =
        sqlx::query_as("SELECT data_time, submit_user FROM tasks")
            .fetch_one(env.store.pool())
            .await?;
    assert_eq!(
        data_time.map(|t| t.to_jiff()),
        Some("2026-03-01T00:00:00Z".parse()?)
    );
    assert_eq!(submit_user.as_deref(), Some("local"));
    env.cleanup().await
}

/// A daily job in Asia/Shanghai runs for local midnight (16:00 UTC the day before), and its daily
/// downstream in the same zone runs for the same data time; a zone that does not exist is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daily_job_in_a_zone_runs_for_local_midnight() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    for name in ["cn-extract", "cn-report"] {
        env.chime_ok(&[
            "job",
            "create",
            name,
            "--kind",
            "noop",
            "--data-time-period",
            "day",
            "--data-time-zone",
            "Asia/Shanghai",
        ])
        .await?;
    }
    env.chime_ok(&["job", "depend", "cn-report", "--on", "cn-extract"])
        .await?;
    // 2026-03-01 20:00 UTC is 2026-03-02 04:00 in Shanghai: that day began at 16:00 UTC on the 1st.
    env.chime_ok(&[
        "job",
        "run",
        "cn-extract",
        "--data-time",
        "2026-03-01T20:00:00Z",
    ])
    .await?;
    let local_midnight: jiff::Timestamp = "2026-03-01T16:00:00Z".parse()?;
    eventually("the downstream to run for the same local day", || async {
        let rows: Vec<(String, Option<jiff_sqlx::Timestamp>, String)> = sqlx::query_as(
            "SELECT j.name, t.data_time, t.status FROM tasks t JOIN jobs j ON j.id = t.job_id
             ORDER BY j.name",
        )
        .fetch_all(env.store.pool())
        .await?;
        Ok(rows.len() == 2
            && rows.iter().all(|(_, data_time, status)| {
                data_time.map(|t| t.to_jiff()) == Some(local_midnight) && status == "succeeded"
            }))
    })
    .await?;
    let refused = env
        .chime(&[
            "job",
            "create",
            "nowhere",
            "--kind",
            "noop",
            "--data-time-period",
            "day",
            "--data-time-zone",
            "Mars/Olympus",
        ])
        .await?;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not an IANA time zone"),
        "{refused:?}"
    );
    env.cleanup().await
}

/// `up1 → down1 → down2`: up1 fails and both downstream tasks fail `upstream_failed`. One rerun
/// of up1 brings the whole chain back (the same tasks, waiting, then run in order); `--downstream`
/// runs the chain again though it had succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_chain_recovers_with_one_rerun() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let flag = std::env::temp_dir().join(format!("chime-flag-{}", Uuid::now_v7()));
    let script = format!("test -f {}", flag.display());
    env.chime_ok(&[
        "job", "create", "up1", "--kind", "shell", "--script", &script,
    ])
    .await?;
    for job in ["down1", "down2"] {
        env.chime_ok(&["job", "create", job, "--kind", "noop"])
            .await?;
    }
    env.chime_ok(&["job", "depend", "down1", "--on", "up1"])
        .await?;
    env.chime_ok(&["job", "depend", "down2", "--on", "down1"])
        .await?;
    let at = "2026-11-22T00:00:00Z";
    let up: Uuid = env
        .chime_ok(&["job", "run", "up1", "--data-time", at])
        .await?
        .parse()?;
    assert_eq!(env.wait_terminal(up).await?.status, TaskStatus::Failed);
    let mut chain = Vec::new();
    for job in ["down1", "down2"] {
        let tasks = wait_ended(&env, job, 1).await?;
        assert_eq!(tasks[0].reason.as_deref(), Some("upstream_failed"), "{job}");
        chain.push(tasks[0].id);
    }

    // The input is fixed; one rerun of the upstream recovers the chain.
    std::fs::write(&flag, "")?;
    let out = env.chime(&["task", "rerun", &up.to_string()]).await?;
    ensure!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("2 downstream task(s) waiting again"),
        "{said}"
    );
    for id in &chain {
        assert!(said.contains(&id.to_string()), "{said} should name {id}");
    }
    for (job, id) in ["down1", "down2"].iter().zip(&chain) {
        let task = env.wait_terminal(*id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded, "{job}: {task:?}");
        assert_eq!(task.attempts.len(), 1, "{job} ran once: {task:?}");
        // Still one task per job and data time.
        assert_eq!(tasks_of(&env, job).await?.len(), 1, "{job}");
    }
    let down1 = env.task(chain[0]).await?;
    let down2 = env.task(chain[1]).await?;
    assert!(
        down2.attempts[0].started_at >= down1.finished_at.expect("down1 ended"),
        "down2 ran after down1"
    );

    // --downstream: the succeeded chain runs again, as Airflow's Clear → Downstream.
    let out = env
        .chime(&["task", "rerun", &up.to_string(), "--downstream"])
        .await?;
    ensure!(out.status.success(), "{out:?}");
    eventually("the chain to run again", || async {
        let up = env.task(up).await?;
        let down2 = env.task(chain[1]).await?;
        Ok(up.attempt == 3 && down2.status == TaskStatus::Succeeded && down2.attempts.len() == 2)
    })
    .await?;
    let _ = std::fs::remove_file(&flag);
    env.cleanup().await
}

/// The same chain made by a backfill (`--with-downstream`): `load → clean → report`, `clean`
/// fails and `report` fails `upstream_failed`. One rerun of `clean` brings `report` back, and a
/// rerun of the backfilled `load` with `--downstream` runs the whole chain again: a backfill's
/// downstream tasks recover as those of triggers and `job run` do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfilled_chain_recovers_with_one_rerun() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let flag = std::env::temp_dir().join(format!("chime-flag-{}", Uuid::now_v7()));
    let daily = r#"{"kind":"cron","cron":"0 0 0 * * ?","time_zone":"UTC"}"#;
    for (job, script) in [
        ("load", "true".to_string()),
        ("clean", format!("test -f {}", flag.display())),
        ("report", "true".to_string()),
    ] {
        env.chime_ok(&[
            "job",
            "create",
            job,
            "--kind",
            "shell",
            "--script",
            &script,
            "--data-time-period",
            "day",
        ])
        .await?;
        env.chime_ok(&[
            "trigger",
            "create",
            &format!("{job}-daily"),
            "--job",
            job,
            "--schedule",
            daily,
        ])
        .await?;
    }
    env.chime_ok(&["job", "depend", "clean", "--on", "load"])
        .await?;
    env.chime_ok(&["job", "depend", "report", "--on", "clean"])
        .await?;
    let at = "2026-02-01T00:00:00Z";
    env.chime_ok(&[
        "backfill",
        "load",
        "--from",
        at,
        "--to",
        at,
        "--with-downstream",
    ])
    .await?;
    let load = wait_ended(&env, "load", 1).await?.remove(0);
    let clean = wait_ended(&env, "clean", 1).await?.remove(0);
    let report = wait_ended(&env, "report", 1).await?.remove(0);
    assert_eq!(load.status, TaskStatus::Succeeded);
    assert_eq!(clean.status, TaskStatus::Failed);
    assert_eq!(report.reason.as_deref(), Some("upstream_failed"));
    for task in [&load, &clean, &report] {
        assert!(task.backfill_id.is_some(), "a backfill's task: {task:?}");
    }

    // The input is fixed; one rerun of the middle recovers the rest.
    std::fs::write(&flag, "")?;
    let out = env.chime(&["task", "rerun", &clean.id.to_string()]).await?;
    ensure!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("1 downstream task(s) waiting again")
            && said.contains(&report.id.to_string()),
        "{said}"
    );
    for id in [clean.id, report.id] {
        let task = env.wait_terminal(id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    }
    for job in ["load", "clean", "report"] {
        assert_eq!(tasks_of(&env, job).await?.len(), 1, "one task of {job}");
    }

    // --downstream from the backfilled root: the succeeded chain runs again.
    let out = env
        .chime(&["task", "rerun", &load.id.to_string(), "--downstream"])
        .await?;
    ensure!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("2 downstream task(s) waiting again"),
        "{said}"
    );
    eventually("the backfilled chain to run again", || async {
        let report = env.task(report.id).await?;
        let clean = env.task(clean.id).await?;
        Ok(report.status == TaskStatus::Succeeded
            && report.attempts.len() == 2
            && clean.attempts.len() == 3)
    })
    .await?;
    let _ = std::fs::remove_file(&flag);
    env.cleanup().await
}

/// `chime task rerun --job J --status failed --data-time-from … --data-time-to …`: every failed
/// run of the job in the range, in one transaction, with a dry run first; and the same for kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_failed_runs_in_a_range_rerun_and_kill_in_one_step() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let flag = std::env::temp_dir().join(format!("chime-flag-{}", Uuid::now_v7()));
    let script = format!("test -f {}", flag.display());
    env.chime_ok(&[
        "job", "create", "load", "--kind", "shell", "--script", &script,
    ])
    .await?;
    let days = [
        "2026-11-20T00:00:00Z",
        "2026-11-21T00:00:00Z",
        "2026-11-22T00:00:00Z",
    ];
    let mut ids = Vec::new();
    for day in days {
        let id: Uuid = env
            .chime_ok(&["job", "run", "load", "--data-time", day])
            .await?
            .parse()?;
        assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Failed);
        ids.push(id);
    }
    std::fs::write(&flag, "")?;
    let range = [
        "--job",
        "load",
        "--status",
        "failed",
        "--data-time-from",
        days[1],
        "--data-time-to",
        days[2],
    ];
    // A dry run names the two in range and changes nothing.
    let mut dry = vec!["task", "rerun"];
    dry.extend_from_slice(&range);
    dry.push("--dry-run");
    let out = env.chime(&dry).await?;
    ensure!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("2 task(s) of default.load would be re-run"),
        "{said}"
    );
    assert!(said.contains(&ids[1].to_string()) && said.contains(&ids[2].to_string()));
    assert_eq!(env.task(ids[1]).await?.status, TaskStatus::Failed);

    let mut rerun = vec!["task", "rerun"];
    rerun.extend_from_slice(&range);
    let out = env.chime(&rerun).await?;
    ensure!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)?.contains("2 task(s) of default.load re-run"));
    for id in &ids[1..] {
        let task = env.wait_terminal(*id).await?;
        assert_eq!((task.status, task.attempt), (TaskStatus::Succeeded, 2));
    }
    // Outside the range: untouched.
    let first = env.task(ids[0]).await?;
    assert_eq!((first.status, first.attempt), (TaskStatus::Failed, 1));

    // Kill: a job's runs that have not ended, in one statement.
    env.chime_ok(&[
        "job", "create", "slow", "--kind", "shell", "--script", "sleep 60",
    ])
    .await?;
    let mut slow = Vec::new();
    for day in &days[..2] {
        slow.push(
            env.chime_ok(&["job", "run", "slow", "--data-time", day])
                .await?
                .parse::<Uuid>()?,
        );
    }
    let out = env.chime(&["task", "kill", "--job", "slow"]).await?;
    ensure!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)?.contains("2 task(s) of default.slow killed"));
    for id in slow {
        assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Killed);
    }
    // Bad input: an unknown status is named, and nothing changes.
    let out = env
        .chime(&["task", "rerun", "--job", "load", "--status", "lost"])
        .await?;
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)?.contains("status \"lost\""));
    // A job that runs one task at a time is not re-run in bulk: its runs would overlap.
    env.chime_ok(&["job", "update", "load", "--no-concurrent"])
        .await?;
    let out = env.chime(&["task", "rerun", "--job", "load"]).await?;
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8(out.stderr)?.contains("one task at a time"),
        "the refusal says why"
    );
    assert_eq!(env.task(ids[0]).await?.attempt, 1, "nothing was re-run");
    let _ = std::fs::remove_file(&flag);
    env.cleanup().await
}

/// Without `chime dependency`, a downstream waits for ever: the overview, `chime services` and
/// the waiting task say why. A ready task in a group no worker serves says so too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_dependency_service_and_an_unserved_group_say_so() -> Result<()> {
    let mut env = TestEnv::new().await?;
    // Few inline slots, so that filling them takes few tasks.
    env.settings.worker.inline_concurrency = 3;
    env.start(Services {
        api: true,
        scheduler: true,
        worker: true,
        dependency: false,
    })
    .await?;
    for job in ["up", "down"] {
        env.chime_ok(&["job", "create", job, "--kind", "noop"])
            .await?;
    }
    env.chime_ok(&["job", "depend", "down", "--on", "up"])
        .await?;
    let at = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(1))?
        .round(jiff::Unit::Second)?;
    let schedule =
        format!(r#"{{"kind":"simple","interval_ms":1000,"repeat_count":0,"start_time":"{at}"}}"#);
    env.chime_ok(&[
        "trigger",
        "create",
        "once",
        "--job",
        "down",
        "--schedule",
        &schedule,
    ])
    .await?;
    eventually("down's task to be waiting", || async {
        Ok(tasks_of(&env, "down").await?.len() == 1)
    })
    .await?;
    let down = tasks_of(&env, "down").await?.remove(0);
    assert_eq!(down.status, TaskStatus::Waiting);

    let overview: serde_json::Value = reqwest::get(format!("{}/api/v1/overview", env.api_url()))
        .await?
        .json()
        .await?;
    let warnings = overview["warnings"].to_string();
    assert!(
        warnings.contains("no dependency service is running"),
        "{overview:#}"
    );
    assert_eq!(overview["services_alive"]["dependency"], 0, "{overview:#}");
    assert_eq!(overview["services_alive"]["api"], 1, "{overview:#}");

    let out = env.chime(&["services"]).await?;
    ensure!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout)?;
    assert!(said.contains("scheduler") && said.contains("api"), "{said}");
    assert!(said.contains("no dependency instance is alive"), "{said}");

    let out = env.chime(&["task", "show", &down.id.to_string()]).await?;
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("not running: no dependency service is running"),
        "{said}"
    );

    // An upstream whose job is paused will not make its run: the waiting task says so.
    env.chime_ok(&["job", "pause", "up"]).await?;
    let out = env.chime(&["task", "show", &down.id.to_string()]).await?;
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("missing: held by its paused job (`chime job resume up --group default`)"),
        "{said}"
    );

    // A group that no worker serves.
    env.chime_ok(&["group", "create", "gpu"]).await?;
    let id = env
        .chime_ok(&["submit", "--kind", "noop", "--worker-group", "gpu"])
        .await?;
    let out = env.chime(&["task", "show", &id]).await?;
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("not running: no worker is online in group gpu"),
        "{said}"
    );
    // Its message waits in a queue nobody consumes: the overview says so.
    eventually("the overview to warn of group gpu's queue", || async {
        let overview: serde_json::Value =
            reqwest::get(format!("{}/api/v1/overview", env.api_url()))
                .await?
                .json()
                .await?;
        Ok(overview["warnings"]
            .to_string()
            .contains("worker group gpu: 1 task message(s) queued and no worker consuming"))
    })
    .await?;

    // Every inline slot of the group busy: a queued noop task counts the tasks ahead of it.
    let slots = usize::from(env.settings.worker.inline_concurrency);
    let spec = r#"{"sleep_ms":60000}"#;
    let mut busy = Vec::new();
    for _ in 0..slots {
        busy.push(
            env.chime_ok(&["submit", "--kind", "noop", "--spec", spec])
                .await?,
        );
    }
    eventually("every slot to be busy", || async {
        let mut running = 0;
        for id in &busy {
            if env.task(id.parse()?).await?.status == TaskStatus::Running {
                running += 1;
            }
        }
        Ok(running == slots)
    })
    .await?;
    let ahead = env
        .chime_ok(&["submit", "--kind", "noop", "--priority", "5"])
        .await?;
    let queued = env.chime_ok(&["submit", "--kind", "noop"]).await?;
    let out = env.chime(&["task", "show", &queued]).await?;
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains(&format!(
            "not running: all {slots} inline slots of group default's 1 online worker(s) are \
             busy; 1 task(s) are queued ahead of it"
        )),
        "{said}"
    );
    for id in [&queued, &ahead].into_iter().chain(&busy) {
        env.chime_ok(&["task", "kill", id]).await?;
    }
    env.cleanup().await
}

/// An installation upgraded from a version whose relays sent a job's events under
/// `task.<status>.#` only keeps that binding (so those relays' events still reach the dependency
/// service) until `chime migrate --drop-old-bindings`; from then on only a job's events, under
/// the key the relay adds in a `BCC` header, reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_bindings_stay_until_migrate_drops_them() -> Result<()> {
    let env = TestEnv::new().await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    // As an earlier version declared it, then as this one does.
    topology.declare(&channel).await?;
    channel
        .queue_bind(
            topology.dependencies_queue().into(),
            topology.events_exchange().into(),
            "task.succeeded.#".into(),
            lapin::options::QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    topology.declare(&channel).await?;
    let ad_hoc = serde_json::json!({
        "v": 1, "task_id": Uuid::now_v7(), "attempt": 1, "status": "succeeded",
        "group": "default", "job_id": null, "data_time": null, "reason": null,
        "at": "2026-11-25T00:00:00Z",
    })
    .to_string();
    let publish = |key: &'static str, body: String, headers: FieldTable| {
        let (channel, exchange) = (&channel, topology.events_exchange());
        async move {
            publish_confirmed(channel, &exchange, key, body.as_bytes(), headers).await?;
            Ok::<_, anyhow::Error>(())
        }
    };
    publish(
        "task.succeeded.default",
        ad_hoc.clone(),
        FieldTable::default(),
    )
    .await?;
    eventually("the old binding to route an event", || async {
        Ok(chime_tests::queue_depth(&channel, &topology.dependencies_queue()).await? == 1)
    })
    .await?;

    env.chime_ok(&["migrate", "--drop-old-bindings"]).await?;
    // Published as mandatory: an ad-hoc task's event now reaches no queue at all.
    let unroutable = publish("task.succeeded.default", ad_hoc, FieldTable::default()).await;
    ensure!(
        unroutable.is_err_and(|e| e.to_string().contains("no queue is bound")),
        "an ad-hoc task's event still reaches the dependency queue"
    );
    let mut bcc = FieldTable::default();
    bcc.insert(
        "BCC".into(),
        lapin::types::AMQPValue::FieldArray(
            vec![lapin::types::AMQPValue::LongString(
                "job.succeeded.default".into(),
            )]
            .into(),
        ),
    );
    let of_a_job = serde_json::json!({
        "v": 1, "task_id": Uuid::now_v7(), "attempt": 1, "status": "succeeded",
        "group": "default", "job_id": 1, "data_time": null, "reason": null,
        "at": "2026-11-25T00:00:00Z",
    })
    .to_string();
    publish("task.succeeded.default", of_a_job, bcc).await?;
    eventually("the job's event to arrive", || async {
        Ok(chime_tests::queue_depth(&channel, &topology.dependencies_queue()).await? == 2)
    })
    .await?;
    // Confirmed publishes are routed: nothing more is on its way.
    ensure!(chime_tests::queue_depth(&channel, &topology.dependencies_queue()).await? == 2);
    let _ = conn.close(200, "done".into()).await;
    env.cleanup().await
}

/// Two jobs that each fire on an interval (`--every`) with no data-time period have data times
/// milliseconds apart that never meet: `job depend` between them, and a trigger that would make
/// such a pair, are refused saying what to set; with a shared period, the same is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_whose_data_times_never_meet_are_refused() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    for job in ["extract", "load"] {
        env.chime_ok(&["job", "create", job, "--kind", "noop"])
            .await?;
        env.chime_ok(&[
            "trigger",
            "create",
            &format!("{job}-often"),
            "--job",
            job,
            "--every",
            "10s",
        ])
        .await?;
    }
    let refused = env
        .chime(&["job", "depend", "load", "--on", "extract"])
        .await?;
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("default.load would wait for ever for default.extract")
            && stderr.contains("default.load: no data-time period")
            && stderr.contains("--data-time-period"),
        "{stderr}"
    );
    let edges: i64 = sqlx::query_scalar("SELECT count(*) FROM job_dependencies")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(edges, 0, "the refused dependency was not added");
    // With a shared period both runs of a minute have that minute as their data time.
    for job in ["extract", "load"] {
        env.chime_ok(&["job", "update", job, "--data-time-period", "minute"])
            .await?;
    }
    env.chime_ok(&["job", "depend", "load", "--on", "extract"])
        .await?;
    // A run by hand does not wait for its upstreams, and says so.
    let run = env.chime(&["job", "run", "load"]).await?;
    assert!(run.status.success(), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("note: this run does not wait for default.extract"),
        "{stderr}"
    );

    // The other way round: the dependency first, then a trigger that would break it.
    for job in ["a", "b"] {
        env.chime_ok(&["job", "create", job, "--kind", "noop"])
            .await?;
    }
    env.chime_ok(&["job", "depend", "b", "--on", "a"]).await?;
    env.chime_ok(&[
        "trigger", "create", "a-often", "--job", "a", "--every", "5s",
    ])
    .await?;
    let refused = env
        .chime(&[
            "trigger", "create", "b-often", "--job", "b", "--every", "5s",
        ])
        .await?;
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("would wait for ever"), "{stderr}");
    let triggers: i64 = sqlx::query_scalar("SELECT count(*) FROM triggers WHERE name = 'b-often'")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(triggers, 0, "the refused trigger was not made");
    env.cleanup().await
}
