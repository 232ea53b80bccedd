//! Frozen processes (SIGSTOP: a stalled runtime, a VM pause) and recovery right after a start:
//! a frozen worker whose database sessions end never runs an attempt beside its re-run; a
//! scheduler frozen inside its firing transaction holds no trigger hostage; a worker killed just
//! after the only scheduler started is recovered without the restart grace.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_core::model::{AttemptOutcome, TaskStatus};
use chime_tests::{TestEnv, eventually};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use uuid::Uuid;

fn signal(child: &tokio::process::Child, signal: Signal) -> Result<()> {
    let pid = child.id().context("the process has exited")?;
    kill(Pid::from_raw(i32::try_from(pid)?), signal)?;
    Ok(())
}

async fn online_workers(env: &TestEnv, n: i64) -> Result<()> {
    eventually(&format!("{n} workers online"), || async {
        let online: i64 =
            sqlx::query_scalar("SELECT count(*) FROM workers WHERE status = 'online'")
                .fetch_one(env.store.pool())
                .await?;
        Ok(online >= n)
    })
    .await
}

/// Ends every database session of the process `pid` (a network blip, a database that dropped it).
async fn terminate_sessions(env: &TestEnv, pid: u32) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                               WHERE application_name = $1) t",
    )
    .bind(format!("chime[{pid}]"))
    .fetch_one(env.store.pool())
    .await?)
}

/// The lines `TASK ATTEMPT EVENT NANOS` the tests' commands append to `log`.
fn log_lines(log: &std::path::Path) -> Vec<(Uuid, i32, String, i128)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            Some((
                parts.next()?.parse().ok()?,
                parts.next()?.parse().ok()?,
                parts.next()?.to_string(),
                parts.next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// Nanoseconds since the epoch, as `date +%s%N` writes them.
fn now_ns() -> i128 {
    jiff::Timestamp::now().as_nanosecond()
}

/// The scenario that ran two attempts at once: a worker running 5 `requests_recovery` tasks is
/// frozen for 20 s and its database sessions are ended during the freeze. Its attempts run again
/// on a standby worker while it is still frozen, and no line of attempt 1 (its commands write one
/// every 100 ms) comes after attempt 2 started: its guard killed them first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_whose_sessions_end_never_runs_an_attempt_beside_its_rerun() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services {
        api: true,
        worker: false,
        scheduler: true,
        dependency: false,
    })
    .await?;
    let mut frozen = env.spawn_chime(&["worker", "--concurrency", "5"])?;
    online_workers(&env, 1).await?;
    let dir = chime_tests::scratch_dir("frozen-worker")?;
    let log = dir.join("log");
    let script = format!(
        r#"echo "$CHIME_TASK_ID $CHIME_ATTEMPT start $(date +%s%N)" >> {log}
n=10; [ "$CHIME_ATTEMPT" = 1 ] && n=300
i=0; while [ $i -lt $n ]; do echo "$CHIME_TASK_ID $CHIME_ATTEMPT tick $(date +%s%N)" >> {log}; sleep 0.1; i=$((i + 1)); done"#,
        log = log.display()
    );
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            env.submit(&[
                "--kind",
                "shell",
                "--requests-recovery",
                "--script",
                &script,
            ])
            .await?,
        );
    }
    let lines = || log_lines(&log);
    eventually("attempt 1 of every task to run", || async {
        let started = lines()
            .iter()
            .filter(|(_, attempt, what, _)| *attempt == 1 && what == "start")
            .count();
        Ok(started == ids.len())
    })
    .await?;
    let _standby = env.spawn_chime(&["worker", "--concurrency", "5"])?;
    online_workers(&env, 2).await?;

    let pid = frozen.id().context("the worker runs")?;
    signal(&frozen, Signal::SIGSTOP)?;
    let frozen_at = now_ns();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ended = terminate_sessions(&env, pid).await?;
    anyhow::ensure!(ended > 0, "the frozen worker had database sessions");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let thawed_at = now_ns();
    signal(&frozen, Signal::SIGCONT)?;

    for id in &ids {
        let task = env.wait_terminal(*id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        assert_eq!(task.attempt, 2, "{task:?}");
        assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Lost));
    }
    let lines = lines();
    for id in &ids {
        let of = |attempt: i32| lines.iter().filter(move |l| l.0 == *id && l.1 == attempt);
        let last_of_first = of(1).map(|l| l.3).max().context("attempt 1 wrote")?;
        let second_start = of(2)
            .filter(|l| l.2 == "start")
            .map(|l| l.3)
            .min()
            .context("attempt 2 started")?;
        assert!(
            last_of_first < second_start,
            "task {id}: attempt 1 wrote {} ms after attempt 2 started",
            (last_of_first - second_start) / 1_000_000
        );
        assert!(
            second_start < thawed_at,
            "task {id}: attempt 2 started {} ms after the freeze, when the worker had thawed",
            (second_start - frozen_at) / 1_000_000
        );
        let starts = lines
            .iter()
            .filter(|l| l.0 == *id && l.2 == "start")
            .count();
        assert_eq!(starts, 2, "task {id}: one start per attempt in the log");
    }
    // The thawed worker lives on and renews its lease.
    signal(&frozen, Signal::SIGTERM)?;
    frozen.wait().await?;
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await
}

/// A worker killed with -9 5 s after the only scheduler started is recovered as promptly as in a
/// cluster that has run for long: a new scheduler waits out no start-up grace of its own (only a
/// database that restarted makes it wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_just_after_the_scheduler_started_is_recovered_promptly() -> Result<()> {
    let mut env = TestEnv::new().await?;
    // The victim alone first, so that it runs every task; the standby joins once they run.
    let mut victim = env.spawn_chime(&["worker", "--concurrency", "3"])?;
    online_workers(&env, 1).await?;
    let topology = chime_core::bus::Topology::new(env.settings.prefix.clone());
    let mut ids = Vec::new();
    for _ in 0..3 {
        let task = chime_core::store::task_lifecycle::submit(
            &env.store,
            &topology,
            chime_core::model::NewTask {
                kind: "shell".into(),
                spec: serde_json::json!({
                    "command": r#"if [ "$CHIME_ATTEMPT" = 1 ]; then sleep 600; fi"#
                }),
                requests_recovery: Some(true),
                ..chime_core::model::NewTask::default()
            },
        )
        .await?;
        ids.push(task.id);
    }
    eventually("every task to run", || async {
        let running: i64 =
            sqlx::query_scalar("SELECT count(*) FROM tasks WHERE status = 'running'")
                .fetch_one(env.store.pool())
                .await?;
        Ok(running == 3)
    })
    .await?;
    let _standby = env.spawn_chime(&["worker", "--concurrency", "3"])?;
    online_workers(&env, 2).await?;
    let on_victim = ids;
    env.start(Services {
        api: false,
        worker: false,
        scheduler: true,
        dependency: false,
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    signal(&victim, Signal::SIGKILL)?;
    victim.wait().await?;
    let killed_at = std::time::Instant::now();
    for id in &on_victim {
        eventually("the re-run to start", || async {
            Ok(env.task(*id).await?.attempt >= 2)
        })
        .await?;
    }
    // Well under the 20 s the restart grace would have added; `chime bench recovery --fresh`
    // measures it.
    assert!(
        killed_at.elapsed() < Duration::from_secs(12),
        "the re-runs started {:?} after the kill",
        killed_at.elapsed()
    );
    env.cleanup().await
}

/// A scheduler frozen for 90 s inside its firing transaction (after locking a trigger, before
/// committing) loses no fire of that trigger: the server ends its idle transaction, which frees
/// the trigger for the healthy instance, and no fire is skipped as a misfire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_frozen_inside_its_firing_transaction_loses_no_fire() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.noop_job("often", true, 0).await?;
    chime_core::store::triggers::create(
        &env.store,
        chime_core::store::triggers::NewTrigger {
            group: None,
            name: "every-second".into(),
            job_group: None,
            job: "often".into(),
            schedule: chime_core::schedule::ScheduleSpec::Cron {
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
    env.start(Services {
        api: false,
        worker: true,
        scheduler: false,
        dependency: false,
    })
    .await?;
    let mut frozen = env.spawn_chime(&["scheduler"])?;
    let fires = || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM fired_triggers")
            .fetch_one(env.store.pool())
            .await?;
        anyhow::Ok(n)
    };
    eventually("the scheduler to fire", || async {
        Ok(fires().await? >= 2)
    })
    .await?;
    // Hold every insert of a fire until the scheduler waits inside its transaction, with the
    // trigger's row locked; freeze it there; let the insert through.
    let mut blocker = env.store.pool().begin().await?;
    sqlx::query("LOCK TABLE fired_triggers IN EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await?;
    let name = format!("chime[{}]", frozen.id().context("the scheduler runs")?);
    eventually(
        "the scheduler to wait inside its firing transaction",
        || async {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = $1 AND wait_event_type = 'Lock'",
            )
            .bind(&name)
            .fetch_one(env.store.pool())
            .await?;
            Ok(waiting > 0)
        },
    )
    .await?;
    signal(&frozen, Signal::SIGSTOP)?;
    let frozen_at = jiff::Timestamp::now();
    blocker.commit().await?;
    let _healthy = env.spawn_chime(&["scheduler"])?;
    tokio::time::sleep(Duration::from_secs(90)).await;
    signal(&frozen, Signal::SIGCONT)?;
    let thawed_at = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(3)).await;

    let rows: Vec<(jiff_sqlx::Timestamp, jiff_sqlx::Timestamp)> = sqlx::query_as(
        "SELECT sched_time, fired_time FROM fired_triggers
         WHERE sched_time BETWEEN $1 AND $2 ORDER BY sched_time",
    )
    .bind(jiff_sqlx::Timestamp::from(frozen_at))
    .bind(jiff_sqlx::Timestamp::from(thawed_at))
    .fetch_all(env.store.pool())
    .await?;
    let fired: BTreeMap<i64, i64> = rows
        .iter()
        .map(|(sched, fired)| {
            let sched = sched.to_jiff();
            (
                sched.as_second(),
                (fired.to_jiff() - sched)
                    .total(jiff::Unit::Millisecond)
                    .unwrap_or(0.0) as i64,
            )
        })
        .collect();
    let first = frozen_at.as_second() + 1;
    let last = thawed_at.as_second();
    let missing: Vec<i64> = (first..=last).filter(|s| !fired.contains_key(s)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} fires during the freeze are missing (first missing {:?} s after it began)",
        missing.len(),
        last - first + 1,
        missing.first().map(|s| s - frozen_at.as_second())
    );
    let latest = fired.values().max().copied().unwrap_or(0);
    assert!(
        latest < 60_000,
        "a fire came {latest} ms late: past the misfire threshold"
    );
    signal(&frozen, Signal::SIGTERM)?;
    frozen.wait().await?;
    env.cleanup().await
}

/// The processes other than `worker` that share its command line and its installation's prefix:
/// its guard (forked from it, never exec'd).
fn guards_of(worker: u32, prefix: &str) -> Result<Vec<u32>> {
    let cmdline = std::fs::read(format!("/proc/{worker}/cmdline"))?;
    let marker = format!("CHIME_PREFIX={prefix}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == worker {
            continue;
        }
        let same_command =
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline);
        let same_install = std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|e| e.split(|b| *b == 0).any(|var| var == marker.as_bytes()));
        if same_command && same_install {
            found.push(pid);
        }
    }
    Ok(found)
}

/// A worker whose guard is killed does not go on unguarded: it starts nothing more, ends the
/// attempts it runs (lost, and run again elsewhere, as `requests_recovery` asks) and exits
/// non-zero saying why, so a supervisor starts it again with a new guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_guard_is_killed_ends_its_attempts_and_stops() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services {
        api: true,
        worker: false,
        scheduler: true,
        dependency: false,
    })
    .await?;
    let mut worker = env
        .chime_command(&["worker", "--concurrency", "2"])?
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    online_workers(&env, 1).await?;
    let pid = worker.id().context("the worker runs")?;
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--requests-recovery",
            "--",
            "sleep",
            "600",
        ])
        .await?;
    eventually("the task to run", || async {
        Ok(env.task(id).await?.status == TaskStatus::Running)
    })
    .await?;
    let guards = guards_of(pid, &env.settings.prefix)?;
    anyhow::ensure!(guards.len() == 1, "one guard: {guards:?}");
    kill(Pid::from_raw(guards[0] as i32), Signal::SIGKILL)?;
    let exited = tokio::time::timeout(Duration::from_secs(60), worker.wait())
        .await
        .context("the worker went on without its guard")??;
    assert!(!exited.success(), "{exited:?}");
    let mut stderr = String::new();
    if let Some(mut err) = worker.stderr.take() {
        use tokio::io::AsyncReadExt;
        err.read_to_string(&mut stderr).await?;
    }
    assert!(stderr.contains("guard"), "{stderr}");
    // Its attempt ended, and runs again on a worker with a guard.
    let _standby = env.spawn_chime(&["worker"])?;
    eventually("the task to run again elsewhere", || async {
        let task = env.task(id).await?;
        Ok(task.attempt == 2 && task.status == TaskStatus::Running)
    })
    .await?;
    let task = env.task(id).await?;
    assert_eq!(
        task.attempts[0].outcome,
        Some(AttemptOutcome::Lost),
        "{task:?}"
    );
    env.chime_ok(&["task", "kill", &id.to_string()]).await?;
    env.cleanup().await
}

/// Issue 42, item 16: PostgreSQL refusing one worker while it serves everyone else (a firewall
/// REJECT, a proxy restarting, a Service without endpoints), which the worker cannot tell from a
/// restart. Four `requests_recovery` tasks run on it, a standby beside it. A 6 s refusal is held
/// through under the worker's grace mark: every attempt runs on, and the two short tasks succeed
/// at their first attempt. A 30 s refusal outlasts the restart grace: the two long tasks' first
/// attempts end, and run again on the standby only after their last line. Before, recovery
/// re-ran them within 3 s while the refused worker's grace kept them running (18–22 s side by
/// side).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refused_alone_by_postgresql_never_runs_beside_a_rerun() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services {
        api: true,
        worker: false,
        scheduler: true,
        dependency: false,
    })
    .await?;
    let (proxy, _refused) = env.proxied_worker(4).await?;
    online_workers(&env, 1).await?;
    let dir = chime_tests::scratch_dir("refused-worker")?;
    let log = dir.join("log");
    let script = |first_ticks: u32| {
        format!(
            r#"echo "$CHIME_TASK_ID $CHIME_ATTEMPT start $(date +%s%N)" >> {log}
n=10; [ "$CHIME_ATTEMPT" = 1 ] && n={first_ticks}
i=0; while [ $i -lt $n ]; do echo "$CHIME_TASK_ID $CHIME_ATTEMPT tick $(date +%s%N)" >> {log}; sleep 0.1; i=$((i + 1)); done"#,
            log = log.display()
        )
    };
    let mut short = Vec::new();
    let mut long = Vec::new();
    for (ids, ticks) in [(&mut short, 150), (&mut long, 1200)] {
        for _ in 0..2 {
            let script = script(ticks);
            ids.push(
                env.submit(&[
                    "--kind",
                    "shell",
                    "--requests-recovery",
                    "--script",
                    &script,
                ])
                .await?,
            );
        }
    }
    let lines = || log_lines(&log);
    eventually("attempt 1 of every task to run", || async {
        let started = lines()
            .iter()
            .filter(|(_, attempt, what, _)| *attempt == 1 && what == "start")
            .count();
        Ok(started == 4)
    })
    .await?;
    let _standby = env.spawn_chime(&["worker", "--concurrency", "4"])?;
    online_workers(&env, 2).await?;

    // Short: held through.
    proxy.refuse();
    tokio::time::sleep(Duration::from_secs(6)).await;
    proxy.restore();
    for id in &short {
        let task = env.wait_terminal(*id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        assert_eq!(task.attempt, 1, "a 6 s refusal re-ran {task:?}");
    }
    for id in &long {
        assert_eq!(env.task(*id).await?.attempt, 1, "a 6 s refusal re-ran {id}");
    }

    // Long: past the grace, ended, then run again elsewhere.
    proxy.refuse();
    for id in &long {
        chime_tests::eventually_within("the re-run to start", Duration::from_secs(90), || async {
            Ok(env.task(*id).await?.attempt >= 2)
        })
        .await?;
    }
    proxy.restore();
    for id in &long {
        let task = env.wait_terminal(*id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        assert_eq!(task.attempt, 2, "{task:?}");
        assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Lost));
    }
    let lines = lines();
    for id in &long {
        let of = |attempt: i32| lines.iter().filter(move |l| l.0 == *id && l.1 == attempt);
        let last_of_first = of(1).map(|l| l.3).max().context("attempt 1 wrote")?;
        let second_start = of(2)
            .filter(|l| l.2 == "start")
            .map(|l| l.3)
            .min()
            .context("attempt 2 started")?;
        assert!(
            last_of_first < second_start,
            "task {id}: attempt 1 wrote {} ms after attempt 2 started",
            (last_of_first - second_start) / 1_000_000
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await
}

/// A worker refused alone by PostgreSQL takes a message while its grace holds its lease, and
/// cannot start it: the refusal outlasts the grace, so the lease it took the message under runs
/// out. Once the worker is back, the task runs, and succeeds, though it allows no retry. Before,
/// the start committed under the renewed lease, the worker then let the attempt go as
/// interrupted (it had been taken under the lapsed one), and the task failed, lost, without its
/// command ever running (the chaos suite's 3c, 2026-11-29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_taken_before_the_lease_ran_out_runs_once_the_worker_is_back() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services {
        api: true,
        worker: false,
        scheduler: true,
        dependency: false,
    })
    .await?;
    let (proxy, _refused) = env.proxied_worker(1).await?;
    online_workers(&env, 1).await?;
    proxy.refuse();
    // Delivered to the worker while its lease holds, under the grace the refusal began.
    let id = env
        .submit(&["--kind", "shell", "--", "echo", "ran"])
        .await?;
    chime_tests::eventually_within(
        "the refused worker to be declared gone",
        Duration::from_secs(90),
        || async {
            let offline: bool =
                sqlx::query_scalar("SELECT bool_and(status = 'offline') FROM workers")
                    .fetch_one(env.store.pool())
                    .await?;
            Ok(offline)
        },
    )
    .await?;
    assert_eq!(env.task(id).await?.status, TaskStatus::Ready);
    proxy.restore();
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    for attempt in &task.attempts {
        // Let go unrun is allowed (a start in flight when the lease ran out); lost otherwise is not.
        if attempt.outcome == Some(AttemptOutcome::Lost) {
            let error = attempt.error.as_deref().unwrap_or_default();
            assert!(error.contains("never ran"), "{task:?}");
        }
    }
    env.cleanup().await
}
