//! Workers as real processes: SIGTERM drains, two workers share a group, a worker killed with
//! SIGKILL mid-task is recovered, and a retry survives a cut broker connection.

use std::time::Duration;

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_core::model::{AttemptOutcome, TaskStatus};
use chime_tests::{TestEnv, eventually};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use uuid::Uuid;

/// The API and a scheduler in-process; workers are the processes under test.
const API_AND_SCHEDULER: Services = Services {
    api: true,
    worker: false,
    scheduler: true,
    dependency: false,
};

fn signal(child: &tokio::process::Child, signal: Signal) -> Result<()> {
    let pid = child.id().context("the process has exited")?;
    kill(Pid::from_raw(i32::try_from(pid)?), signal)?;
    Ok(())
}

/// Waits until `n` workers are online (registered and consuming).
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_running_tasks_finish_and_unstarted_go_back() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    // One slot, prefetch 2: while the long task runs, the next delivery waits in the worker.
    let mut worker = env.spawn_chime_with(
        &["worker", "--concurrency", "1"],
        &[("CHIME_WORKER__PREFETCH", "2")],
    )?;
    online_workers(&env, 1).await?;
    let long = env
        .submit(&["--kind", "shell", "--script", "sleep 2; echo finished"])
        .await?;
    env.wait_status(long, TaskStatus::Running).await?;
    let queued = [
        env.submit(&["--kind", "shell", "--script", "true"]).await?,
        env.submit(&["--kind", "shell", "--script", "true"]).await?,
    ];
    signal(&worker, Signal::SIGTERM)?;
    let status = tokio::time::timeout(Duration::from_secs(30), worker.wait())
        .await
        .context("the worker did not stop within 30 s of SIGTERM")??;
    assert!(status.success(), "exit status {status:?}");

    let task = env.task(long).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.result.map(|r| r.output), Some("finished\n".into()));
    for id in queued {
        let task = env.task(id).await?;
        assert_eq!(task.status, TaskStatus::Ready, "{task:?}");
        assert!(task.attempts.is_empty(), "{task:?}");
    }
    let statuses: Vec<String> = sqlx::query_scalar("SELECT status FROM workers")
        .fetch_all(env.store.pool())
        .await?;
    assert_eq!(statuses, vec!["offline".to_string()]);

    // The deliveries went back to the queue: the next worker runs them as their first attempt.
    env.start(Services::WORKER).await?;
    for id in queued {
        let task = env.wait_terminal(id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded);
        assert_eq!(task.attempt, 1);
    }
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_one_group_share_the_load() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    let one_slot = ["worker", "--concurrency", "1", "--inline-concurrency", "1"];
    let _first = env.spawn_chime(&one_slot)?;
    let _second = env.spawn_chime(&one_slot)?;
    online_workers(&env, 2).await?;
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(
            env.submit(&["--kind", "noop", "--spec", r#"{"sleep_ms": 300}"#])
                .await?,
        );
    }
    let mut names = std::collections::BTreeSet::new();
    for id in ids {
        let task = env.wait_terminal(id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded);
        names.extend(task.attempts.iter().filter_map(|a| a.worker.clone()));
    }
    assert_eq!(names.len(), 2, "tasks ran on {names:?}");
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_task_is_recovered_per_requests_recovery() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    let mut worker = env.spawn_chime(&["worker", "--concurrency", "2"])?;
    online_workers(&env, 1).await?;
    let dir = chime_tests::scratch_dir("test")?;
    // Each command records its process group, so the test can clean up what SIGKILL orphans.
    let recovering_script = format!(
        r#"echo $$ > {}/recovering; if [ "$CHIME_ATTEMPT" = 1 ]; then sleep 600; fi; echo rerun"#,
        dir.display()
    );
    let recovering = env
        .submit(&[
            "--kind",
            "shell",
            "--requests-recovery",
            "--script",
            &recovering_script,
        ])
        .await?;
    let lost_script = format!("echo $$ > {}/lost; sleep 600", dir.display());
    let lost = env
        .submit(&["--kind", "shell", "--script", &lost_script])
        .await?;
    env.wait_status(recovering, TaskStatus::Running).await?;
    env.wait_status(lost, TaskStatus::Running).await?;

    signal(&worker, Signal::SIGKILL)?;
    worker.wait().await?;
    // The commands die with their worker; should one have outlived it, it goes now. (A command
    // the worker was killed before spawning left no pid.)
    for name in ["recovering", "lost"] {
        if let Some(pid) = std::fs::read_to_string(dir.join(name))
            .ok()
            .and_then(|pid| pid.trim().parse::<i32>().ok())
        {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    env.start(Services::WORKER).await?;

    let task = env.wait_terminal(recovering).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    assert_eq!(task.attempt, 2);
    assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Lost));
    assert_eq!(task.result.map(|r| r.output), Some("rerun\n".into()));

    let task = env.wait_terminal(lost).await?;
    assert_eq!(task.status, TaskStatus::Failed, "{task:?}");
    assert_eq!(task.reason.as_deref(), Some("lost"));
    assert_eq!(task.attempts.len(), 1);
    assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Lost));
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_delivered_after_the_broker_connection_was_cut() -> Result<()> {
    let (mut env, proxy) = TestEnv::behind_proxy().await?;
    env.start(Services::ALL).await?;
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--failed-retries",
            "1",
            "--failed-interval-ms",
            "2000",
            "--script",
            r#"[ "$CHIME_ATTEMPT" -ge 2 ]"#,
        ])
        .await?;
    env.wait_status(id, TaskStatus::Retrying).await?;
    proxy.cut();
    // Released while the broker is unreachable: its message waits in the outbox.
    env.wait_status(id, TaskStatus::Ready).await?;
    proxy.restore();
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.attempt, 2);
    assert_eq!(
        task.attempts.iter().map(|a| a.outcome).collect::<Vec<_>>(),
        vec![
            Some(AttemptOutcome::Failed),
            Some(AttemptOutcome::Succeeded)
        ]
    );
    env.cleanup().await
}

/// Hole 5: past the shutdown grace, a worker's running attempts used to be recorded `failed:
/// interrupted`, spending the failed budget even of jobs that a kill -9 would have re-run. An
/// attempt cut short by its worker's shutdown is a lost one: `requests_recovery` decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_cut_short_by_shutdown_is_lost_not_failed() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    let mut worker = env.spawn_chime_with(
        &["worker", "--concurrency", "2"],
        &[("CHIME_WORKER__SHUTDOWN_GRACE_MS", "300")],
    )?;
    online_workers(&env, 1).await?;
    let recovering = env
        .submit(&[
            "--kind",
            "shell",
            "--requests-recovery",
            "--script",
            r#"if [ "$CHIME_ATTEMPT" = 1 ]; then sleep 600; fi; echo rerun"#,
        ])
        .await?;
    let plain = env
        .submit(&["--kind", "shell", "--script", "sleep 600"])
        .await?;
    env.wait_status(recovering, TaskStatus::Running).await?;
    env.wait_status(plain, TaskStatus::Running).await?;
    signal(&worker, Signal::SIGTERM)?;
    let status = tokio::time::timeout(Duration::from_secs(30), worker.wait())
        .await
        .context("the worker did not stop within 30 s of SIGTERM")??;
    assert!(status.success(), "exit status {status:?}");

    let task = env.task(plain).await?;
    assert_eq!(task.status, TaskStatus::Failed, "{task:?}");
    assert_eq!(task.reason.as_deref(), Some("lost"));
    assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Lost));
    env.start(Services::WORKER).await?;
    let task = env.wait_terminal(recovering).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    assert_eq!(task.attempt, 2);
    assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Lost));
    env.cleanup().await
}

/// `chime worker drain ID`: the worker drains as on SIGTERM (its running task finishes) and,
/// alone in its process, exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chime_worker_drain_stops_a_worker_over_the_control_queue() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    let mut worker = env.spawn_chime(&["worker", "--concurrency", "1"])?;
    online_workers(&env, 1).await?;
    let id = env
        .submit(&["--kind", "shell", "--script", "sleep 1; echo finished"])
        .await?;
    env.wait_status(id, TaskStatus::Running).await?;
    let worker_id: Uuid = sqlx::query_scalar("SELECT id FROM workers")
        .fetch_one(env.store.pool())
        .await?;
    let out = env
        .chime(&["worker", "drain", &worker_id.to_string()])
        .await?;
    assert!(out.status.success(), "{out:?}");
    let status = tokio::time::timeout(Duration::from_secs(30), worker.wait())
        .await
        .context("the worker did not stop within 30 s of the drain")??;
    assert!(status.success(), "exit status {status:?}");
    assert_eq!(env.task(id).await?.status, TaskStatus::Succeeded);
    let status: String = sqlx::query_scalar("SELECT status FROM workers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(status, "offline");
    // Draining it again is refused, and an unknown worker is not found.
    let again = env
        .chime(&["worker", "drain", &worker_id.to_string()])
        .await?;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("error:"));
    env.cleanup().await
}

/// The processes whose command line contains `needle` (read from /proc).
fn processes_with(needle: &str) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(needle).then_some((pid, cmdline))
        })
        .collect()
}

/// Nothing a command starts outlives its attempt: a background child, one in a new session
/// (`setsid`, `setsid -f`) and a double-forked one are all gone once the task has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_processes_die_with_it_even_in_a_new_session() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    // Durations no other test uses, to find them in the process table.
    let tag = format!(
        "1{}.{}",
        std::process::id() % 1000,
        Uuid::now_v7().as_u128() % 1000
    );
    let script = format!(
        "sleep {tag}1 & setsid sleep {tag}2 & setsid -f sleep {tag}3; (sleep {tag}4 &); echo started"
    );
    let id = env
        .submit(&["--kind", "shell", "--script", &script])
        .await?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    eventually("the task's children to be gone", || async {
        Ok(processes_with(&format!("sleep {tag}")).is_empty())
    })
    .await?;
    env.cleanup().await
}

/// A worker killed with -9 leaves nothing running beside the re-run of its attempt: attempt 1's
/// command, and a child it started in a session of its own, stop before attempt 2 starts on
/// another worker (seen in a log every process of the task appends to), and its data file is
/// removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_no_process_of_attempt_1_runs_beside_attempt_2() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    let mut first = env.spawn_chime(&["worker"])?;
    online_workers(&env, 1).await?;
    let dir = chime_tests::scratch_dir("rerun-beside")?;
    let log = dir.join("log");
    let script = format!(
        r#"echo "$CHIME_ATTEMPT start $(date +%s%N)" >> {log}
echo "$CHIME_DATA_FILE" > {dir}/data-file-$CHIME_ATTEMPT
setsid sh -c 'while true; do echo "$CHIME_ATTEMPT tick $(date +%s%N)" >> {log}; sleep 0.05; done' &
while true; do echo "$CHIME_ATTEMPT main $(date +%s%N)" >> {log}; sleep 0.05; [ "$CHIME_ATTEMPT" = 1 ] || break; done
sleep 1"#,
        log = log.display(),
        dir = dir.display()
    );
    // Over 64 KiB: the data goes in a file (CHIME_DATA_FILE).
    let data = serde_json::json!({ "big": "x".repeat(100_000) }).to_string();
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--requests-recovery",
            "--data",
            &data,
            "--script",
            &script,
        ])
        .await?;
    let lines = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    eventually("attempt 1 and its own-session child to run", || async {
        Ok(lines().iter().any(|l| l.starts_with("1 tick")))
    })
    .await?;
    let _second = env.spawn_chime(&["worker"])?;
    online_workers(&env, 2).await?;
    signal(&first, Signal::SIGKILL)?;
    first.wait().await?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    assert_eq!(task.attempt, 2);
    let at = |line: &String| -> u128 {
        line.rsplit(' ')
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    };
    let lines = lines();
    let second_start = lines
        .iter()
        .find(|l| l.starts_with("2 start"))
        .map(at)
        .context("attempt 2 started")?;
    let last_of_first = lines
        .iter()
        .filter(|l| l.starts_with("1 "))
        .map(at)
        .max()
        .unwrap_or(0);
    assert!(
        last_of_first < second_start,
        "attempt 1 wrote {} ms after attempt 2 started",
        (last_of_first - second_start) / 1_000_000
    );
    let data_file = std::fs::read_to_string(dir.join("data-file-1"))?;
    assert!(data_file.trim().ends_with(".json"), "{data_file:?}");
    assert!(
        !std::path::Path::new(data_file.trim()).exists(),
        "{data_file} outlived its worker"
    );
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await
}

/// Workers of 16, 4 and 4 slots and 20 long tasks: every task runs at once. A worker holds no
/// more deliveries than it has slots, so none waits behind a full worker while another has a
/// slot free (with a prefetch of twice the slots, the two small workers held 5 tasks unstarted
/// while 9 slots were free).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_go_to_free_slots_not_behind_busy_workers() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    let _workers = [
        env.spawn_chime(&["worker", "--concurrency", "16"])?,
        env.spawn_chime(&["worker", "--concurrency", "4"])?,
        env.spawn_chime(&["worker", "--concurrency", "4"])?,
    ];
    online_workers(&env, 3).await?;
    // Every worker must be consuming before the tasks are published, or the first takes all.
    let queue = chime_core::bus::Topology::new(env.settings.prefix.clone()).group_queue("default");
    eventually("3 consumers on the group's queue", || async {
        let conn = lapin::Connection::connect(
            &env.settings.amqp_url,
            lapin::ConnectionProperties::default(),
        )
        .await?;
        let channel = conn.create_channel().await?;
        let declared = channel
            .queue_declare(
                queue.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await;
        let _ = conn.close(200, "done".into()).await;
        Ok(declared.is_ok_and(|q| q.consumer_count() == 3))
    })
    .await?;
    for _ in 0..20 {
        env.submit(&["--kind", "shell", "--script", "sleep 120"])
            .await?;
    }
    // Well before the first ends, all 20 run.
    eventually("20 tasks running at once", || async {
        let running: i64 =
            sqlx::query_scalar("SELECT count(*) FROM tasks WHERE status = 'running'")
                .fetch_one(env.store.pool())
                .await?;
        Ok(running == 20)
    })
    .await?;
    // The workers' guards end the sleeps when the workers are dropped.
    env.cleanup().await
}

/// A worker has process slots for shell tasks and inline slots for noop and http tasks, each kind
/// with its own queue: a noop task runs while every process slot is busy, a second shell task
/// waits and says for which slots, and `chime workers` shows both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noop_tasks_do_not_wait_for_a_busy_process_slot() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(API_AND_SCHEDULER).await?;
    let _worker =
        env.spawn_chime(&["worker", "--concurrency", "1", "--inline-concurrency", "4"])?;
    online_workers(&env, 1).await?;
    let long = env
        .submit(&["--kind", "shell", "--script", "sleep 120"])
        .await?;
    env.wait_status(long, TaskStatus::Running).await?;
    let waiting = env.submit(&["--kind", "shell", "--script", "true"]).await?;
    for _ in 0..6 {
        let noop = env.submit(&["--kind", "noop"]).await?;
        assert_eq!(env.wait_terminal(noop).await?.status, TaskStatus::Succeeded);
    }
    assert_eq!(env.task(waiting).await?.status, TaskStatus::Ready);
    let out = env.chime(&["task", "show", &waiting.to_string()]).await?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("all 1 process slots of group default's 1 online worker(s) are busy"),
        "{said}"
    );
    let out = env.chime(&["workers"]).await?;
    let said = String::from_utf8(out.stdout)?;
    assert!(
        said.contains("PROCESS SLOTS") && said.contains("INLINE SLOTS"),
        "{said}"
    );
    let row = said.lines().nth(1).unwrap_or_default();
    assert!(
        row.split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w == ["1", "4"]),
        "{said}"
    );
    env.chime_ok(&["task", "kill", &long.to_string()]).await?;
    assert_eq!(
        env.wait_terminal(waiting).await?.status,
        TaskStatus::Succeeded
    );
    env.cleanup().await
}
