//! The worker's paths through the running services: reject and failed budgets with their
//! intervals and backoff, timeouts and kills that take the whole process group, the http executor,
//! command templates and execute_user.

use std::time::Duration;

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_core::config::CommandTemplate;
use chime_core::model::{AttemptOutcome, AttemptView, TaskStatus, TaskView};
use chime_tests::{TestEnv, eventually, last_line};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

const UP: Services = Services::ALL;

/// The wait between one attempt's end and the next one's start.
fn gaps(task: &TaskView) -> Vec<Duration> {
    task.attempts
        .windows(2)
        .map(|pair| {
            let end = pair[0].finished_at.expect("a finished attempt");
            let span = pair[1].started_at.duration_since(end);
            Duration::try_from(span).unwrap_or(Duration::ZERO)
        })
        .collect()
}

fn outcomes(task: &TaskView) -> Vec<Option<AttemptOutcome>> {
    task.attempts
        .iter()
        .map(|a: &AttemptView| a.outcome)
        .collect()
}

/// Whether a process is alive (a zombie waiting to be reaped is not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// A fresh directory for files a test's commands write.
fn scratch_dir() -> Result<std::path::PathBuf> {
    chime_tests::scratch_dir("test")
}

/// Waits for a command's pid file and returns the pid.
async fn pid_from(file: &std::path::Path) -> Result<i32> {
    eventually("the command to write its pid", || async {
        Ok(std::fs::read_to_string(file).is_ok_and(|t| t.trim().parse::<i32>().is_ok()))
    })
    .await?;
    Ok(std::fs::read_to_string(file)?.trim().parse()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_three_times_then_failed_with_the_interval_between_keeping_each_output()
-> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--reject-retries",
            "2",
            "--reject-interval-ms",
            "700",
            "--failed-retries",
            "5",
            "--script",
            "echo the warehouse is locked >&2; exit 75",
        ])
        .await?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.reason.as_deref(), Some("rejected"));
    assert_eq!(task.attempt, 3);
    assert_eq!(outcomes(&task), vec![Some(AttemptOutcome::Rejected); 3]);
    // Each rejection keeps what the command said and its exit code, as a failure does.
    for attempt in &task.attempts {
        assert_eq!(attempt.exit_code, Some(75), "attempt {}", attempt.attempt);
        assert!(
            attempt
                .output
                .as_deref()
                .is_some_and(|o| o.contains("the warehouse is locked")),
            "attempt {} kept no output: {:?}",
            attempt.attempt,
            attempt.output
        );
    }
    for gap in gaps(&task) {
        assert!(
            gap >= Duration::from_millis(700),
            "redelivered after {gap:?}"
        );
    }
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_twice_then_succeeded_with_growing_backoff() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--failed-retries",
            "3",
            "--failed-interval-ms",
            "400",
            "--reject-retries",
            "0",
            "--backoff",
            r#"{"kind":"exponential","factor":3,"max_interval_ms":60000,"jitter":0}"#,
            "--script",
            r#"echo "attempt $CHIME_ATTEMPT"; [ "$CHIME_ATTEMPT" -ge 3 ]"#,
        ])
        .await?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.attempt, 3);
    assert_eq!(
        outcomes(&task),
        vec![
            Some(AttemptOutcome::Failed),
            Some(AttemptOutcome::Failed),
            Some(AttemptOutcome::Succeeded)
        ]
    );
    assert_eq!(
        task.result.as_ref().map(|r| r.output.as_str()),
        Some("attempt 3\n")
    );
    let gaps = gaps(&task);
    // 400 ms, then 400 × 3: a fixed interval would have waited 400 ms twice.
    assert!(gaps[0] >= Duration::from_millis(400), "{gaps:?}");
    assert!(gaps[1] >= Duration::from_millis(1200), "{gaps:?}");

    // The backoff itself: capped growth, and jitter within its bounds.
    let exact: Vec<f64> = sqlx::query_scalar(
        r#"SELECT extract(epoch FROM retry_delay(
               '{"kind":"exponential","factor":2,"max_interval_ms":5000,"jitter":0}', 1000, n))::float8
           FROM generate_series(1, 5) AS n ORDER BY n"#,
    )
    .fetch_all(env.store.pool())
    .await?;
    assert_eq!(exact, vec![1.0, 2.0, 4.0, 5.0, 5.0]);
    let (low, high): (f64, f64) = sqlx::query_as(
        r#"SELECT min(s), max(s) FROM (
               SELECT extract(epoch FROM retry_delay('{"kind":"exponential"}', 1000, 2))::float8 AS s
               FROM generate_series(1, 200)) AS d"#,
    )
    .fetch_one(env.store.pool())
    .await?;
    assert!((1.8..=2.2).contains(&low) && (1.8..=2.2).contains(&high) && low < high);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_the_whole_process_group() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let pid_file = scratch_dir()?.join("child.pid");
    let script = format!("sleep 600 & echo $! > {}; wait", pid_file.display());
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--timeout-ms",
            "1500",
            "--script",
            &script,
        ])
        .await?;
    let child = pid_from(&pid_file).await?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.reason.as_deref(), Some("timeout"));
    eventually("the child sleep to die", || async { Ok(!alive(child)) }).await?;
    env.cleanup().await
}

/// What a task leaves running in the background dies when the task ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_ends_leaves_no_background_child_running() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--script",
            "sleep 1000 >/dev/null 2>&1 & echo $!",
        ])
        .await?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    let child: i32 = task
        .result
        .map(|r| r.output)
        .unwrap_or_default()
        .trim()
        .parse()?;
    eventually("the background sleep to die", || async {
        Ok(!alive(child))
    })
    .await?;
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_ends_a_running_task_and_its_children() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let pid_file = scratch_dir()?.join("child.pid");
    let script = format!("sleep 600 & echo $! > {}; wait", pid_file.display());
    let id = env
        .submit(&["--kind", "shell", "--script", &script])
        .await?;
    let child = pid_from(&pid_file).await?;
    env.wait_status(id, TaskStatus::Running).await?;

    let out = env.chime(&["task", "kill", &id.to_string()]).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(last_line(&out), format!("{id} killed"));
    let task = env.task(id).await?;
    assert_eq!(task.status, TaskStatus::Killed);
    assert_eq!(task.reason.as_deref(), Some("killed"));
    assert_eq!(outcomes(&task), vec![Some(AttemptOutcome::Killed)]);
    eventually("the child sleep to die", || async { Ok(!alive(child)) }).await?;

    // A task that has ended cannot be killed: a clear error, nothing changes.
    let again = env.chime(&["task", "kill", &id.to_string()]).await?;
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("error:") && stderr.contains("already ended"),
        "{stderr}"
    );
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_cancels_a_retrying_task_in_the_database() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--failed-retries",
            "3",
            "--failed-interval-ms",
            "600000",
            "--script",
            "exit 1",
        ])
        .await?;
    let retrying = env.wait_status(id, TaskStatus::Retrying).await?;
    assert!(retrying.next_attempt_at.is_some());
    let response = chime_tests::http()
        .post(format!("{}/api/v1/tasks/{id}/kill", env.api_url()))
        .send()
        .await?;
    assert_eq!(response.status().as_u16(), 200);
    let task: TaskView = response.json().await?;
    assert_eq!(task.status, TaskStatus::Killed);
    assert_eq!(task.next_attempt_at, None);
    assert_eq!(task.attempt, 1);
    env.cleanup().await
}

/// A one-route-at-a-time HTTP server for the http executor: `/busy` answers 503 with
/// Retry-After: 1 the first time, then 200; `/broken` answers 500; `/json` 200 with a JSON
/// body; `/moved` a 302 to `/ok`,
/// `/away` a 302 to another loopback address, `/elsewhere` a 307 to `localhost` (another
/// origin); anything else 200 "fine".
async fn serve_http() -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let port = address.port();
    let redirect = move |status: &str, to: String| {
        format!(
            "HTTP/1.1 {status}\r\nLocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
    };
    tokio::spawn(async move {
        let busy_calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        while let Ok((mut socket, _)) = listener.accept().await {
            let busy_calls = busy_calls.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 8192];
                let Ok(n) = socket.read(&mut buffer).await else {
                    return;
                };
                let request = String::from_utf8_lossy(&buffer[..n]).to_string();
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                let response = match path.as_str() {
                    "/busy" if busy_calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => {
                        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbusy".to_string()
                    }
                    "/broken" => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops".to_string(),
                    "/json" => "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"rows\": 7}".to_string(),
                    "/moved" => redirect("302 Found", "/ok".into()),
                    "/away" => redirect("302 Found", format!("http://127.0.0.2:{port}/ok")),
                    "/elsewhere" => redirect(
                        "307 Temporary Redirect",
                        format!("http://localhost:{port}/ok"),
                    ),
                    _ => "HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\nfine".to_string(),
                };
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok(format!("http://{address}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tasks_succeed_reject_with_retry_after_and_fail() -> Result<()> {
    let mut env = TestEnv::new().await?;
    // The test's server is on loopback, which http tasks may not reach unless allowed.
    env.settings.worker.http_allow = vec!["127.0.0.1".into()];
    env.start(UP).await?;
    let base = serve_http().await?;

    let spec = serde_json::json!({"url": format!("{base}/ok"), "method": "POST",
                                  "body": {"x": 1}, "expected_status": [200]});
    let ok = env
        .submit(&["--kind", "http", "--spec", &spec.to_string()])
        .await?;
    let task = env.wait_terminal(ok).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    let result = task.result.unwrap_or_default();
    assert_eq!(result.output, "fine");
    assert_eq!(result.value, None, "a body that is not JSON is no result");

    // A JSON body is the task's result.
    let spec = serde_json::json!({"url": format!("{base}/json")});
    let json = env
        .submit(&["--kind", "http", "--spec", &spec.to_string()])
        .await?;
    let task = env.wait_terminal(json).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(
        task.result.and_then(|r| r.value),
        Some(serde_json::json!({"rows": 7}))
    );

    let spec = serde_json::json!({"url": format!("{base}/busy")});
    let busy = env
        .submit(&[
            "--kind",
            "http",
            "--reject-retries",
            "1",
            "--reject-interval-ms",
            "0",
            "--spec",
            &spec.to_string(),
        ])
        .await?;
    let task = env.wait_terminal(busy).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(
        outcomes(&task),
        vec![
            Some(AttemptOutcome::Rejected),
            Some(AttemptOutcome::Succeeded)
        ]
    );
    let gap = gaps(&task)[0];
    assert!(
        gap >= Duration::from_secs(1),
        "Retry-After: 1 not honoured: {gap:?}"
    );

    let spec = serde_json::json!({"url": format!("{base}/broken")});
    let broken = env
        .submit(&["--kind", "http", "--spec", &spec.to_string()])
        .await?;
    let task = env.wait_terminal(broken).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    let error = task.result.and_then(|r| r.error).unwrap_or_default();
    assert!(error.contains("500"), "{error}");

    // Redirects: the answer unless the task asks; followed, each target is checked again, and
    // a body is not sent on to another origin.
    let run = |spec: serde_json::Value| {
        let env = &env;
        async move {
            let id = env
                .submit(&["--kind", "http", "--spec", &spec.to_string()])
                .await?;
            env.wait_terminal(id).await
        }
    };
    let task = run(serde_json::json!({"url": format!("{base}/moved")})).await?;
    assert_eq!(task.status, TaskStatus::Failed, "{task:?}");
    let error = task.result.and_then(|r| r.error).unwrap_or_default();
    assert!(error.contains("302"), "{error}");
    let task =
        run(serde_json::json!({"url": format!("{base}/moved"), "follow_redirects": true})).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    assert_eq!(task.result.map(|r| r.output), Some("fine".into()));
    let task =
        run(serde_json::json!({"url": format!("{base}/away"), "follow_redirects": true})).await?;
    assert_eq!(task.status, TaskStatus::Failed, "{task:?}");
    let error = task.result.and_then(|r| r.error).unwrap_or_default();
    assert!(
        error.contains("127.0.0.2") && error.contains("loopback") && error.contains("http_allow"),
        "{error}"
    );
    let task = run(
        serde_json::json!({"url": format!("{base}/elsewhere"), "method": "POST",
                                      "body": {"secret": 1}, "follow_redirects": true}),
    )
    .await?;
    assert_eq!(task.status, TaskStatus::Failed, "{task:?}");
    let error = task.result.and_then(|r| r.error).unwrap_or_default();
    assert!(error.contains("another origin"), "{error}");
    env.cleanup().await
}

/// By default an http task may not reach the machine its worker runs on nor the networks behind
/// it: a call to the API's own loopback address (tokenless there) fails naming the rule and the
/// setting that opens it, whether the URL names the address or a name that resolves to it, and
/// so does the cloud metadata address. Nothing was sent: the API recorded no task from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tasks_may_not_reach_the_machine_or_its_networks() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let api = env.api_url();
    let port = api.rsplit(':').next().unwrap_or("8080").to_string();
    let cases = [
        (
            format!("{api}/api/v1/tasks"),
            "127.0.0.1, a loopback address",
        ),
        (
            format!("http://localhost:{port}/api/v1/tasks"),
            "a loopback address",
        ),
        (
            format!("http://[::1]:{port}/api/v1/tasks"),
            "a loopback address",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "the cloud metadata address",
        ),
        ("http://10.11.12.13/".to_string(), "a private address"),
    ];
    for (url, rule) in cases {
        let spec = serde_json::json!({"url": url, "method": "POST",
                                      "body": {"kind": "shell", "command": ["id"]}});
        let id = env
            .submit(&["--kind", "http", "--spec", &spec.to_string()])
            .await?;
        let task = env.wait_terminal(id).await?;
        assert_eq!(task.status, TaskStatus::Failed, "{url}: {task:?}");
        let error = task.result.and_then(|r| r.error).unwrap_or_default();
        assert!(
            error.contains("refused") && error.contains(rule) && error.contains("http_allow"),
            "{url}: {error}"
        );
    }
    let shells: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE kind = 'shell'")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(shells, 0, "no request reached the API");
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_templates_run_configured_kinds_and_unknown_kinds_are_rejected() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.settings.executors.insert(
        "greet".into(),
        CommandTemplate {
            command: vec!["echo".into(), "hello".into(), "{who}".into()],
            env: Default::default(),
            cwd: None,
        },
    );
    env.start(UP).await?;
    for (kind, group) in [("greet", "default"), ("teleport", "default")] {
        let out = env.chime(&["route", "set", kind, group]).await?;
        assert!(out.status.success(), "{out:?}");
    }
    let greet = env
        .submit(&["--kind", "greet", "--spec", r#"{"who": "world"}"#])
        .await?;
    let task = env.wait_terminal(greet).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.result.map(|r| r.output), Some("hello world\n".into()));

    // A spec without the template's placeholder fails with the field named.
    let bare = env.submit(&["--kind", "greet", "--spec", "{}"]).await?;
    let task = env.wait_terminal(bare).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    let error = task.result.and_then(|r| r.error).unwrap_or_default();
    assert!(error.contains("\"who\""), "{error}");

    // Routed, but no worker has an executor for it: rejected, not failed.
    let teleport = env.submit(&["--kind", "teleport"]).await?;
    let task = env.wait_terminal(teleport).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.reason.as_deref(), Some("rejected"));
    assert_eq!(outcomes(&task), vec![Some(AttemptOutcome::Rejected)]);
    env.cleanup().await
}

/// A root worker never runs a task as root by accident: without an `execute_user` a task runs as
/// the worker's default user (`nobody`), and a task asking for a user gets it only if the worker
/// lists it — root included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_user_runs_as_that_user_or_is_rejected() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.settings.worker.execute_users = vec!["daemon".into(), "no-such-user-here".into()];
    env.start(UP).await?;
    let root = nix::unistd::Uid::effective().is_root();
    let run = |user: Option<&'static str>| {
        let env = &env;
        async move {
            let mut args = vec!["--kind", "shell"];
            if let Some(user) = user {
                args.extend(["--execute-user", user]);
            }
            args.extend(["--", "sh", "-c", "echo $(id -un) $(id -u)"]);
            let id = env.submit(&args).await?;
            env.wait_terminal(id).await
        }
    };
    let task = run(None).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    let output = task.result.map(|r| r.output).unwrap_or_default();
    if root {
        assert_eq!(
            output, "nobody 65534\n",
            "a root worker's default user is nobody"
        );
    } else {
        assert!(!output.ends_with(" 0\n"), "{output}");
    }
    let task = run(Some("daemon")).await?;
    if root {
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        assert_eq!(
            task.result
                .map(|r| r.output)
                .as_deref()
                .and_then(|o| o.split(' ').next()),
            Some("daemon")
        );
    } else {
        assert_eq!(task.reason.as_deref(), Some("rejected"));
    }
    // root is not listed: refused, even though the worker is root.
    let task = run(Some("root")).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.reason.as_deref(), Some("rejected"));
    let error = task.attempts[0].error.clone().context("an attempt error")?;
    if root {
        assert!(
            error.contains("not in this worker's allowed users"),
            "{error}"
        );
    }
    let task = run(Some("no-such-user-here")).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.reason.as_deref(), Some("rejected"));
    let error = task.attempts[0].error.clone().context("an attempt error")?;
    if root {
        assert!(error.contains("does not exist"), "{error}");
    }
    env.cleanup().await
}

/// Hole 7, the ambiguous start: a start that committed while its worker saw an error is asked
/// again; the answer must be yes for that worker (it runs the attempt rather than dropping it and
/// leaving the task `running` with nothing running) and no for any other. Within one batch, the
/// same attempt asked twice is one yes (the worker's own hold on the attempt keeps duplicate
/// deliveries from asking at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_asked_again_by_its_worker_is_its_own_and_no_one_elses() -> Result<()> {
    let env = TestEnv::new().await?;
    let topology = chime_core::bus::Topology::new(env.settings.prefix.clone());
    let task = chime_core::store::task_lifecycle::submit(
        &env.store,
        &topology,
        chime_core::model::NewTask {
            kind: "noop".into(),
            ..Default::default()
        },
    )
    .await?;
    let identity = |name: &str| chime_core::store::task_lifecycle::WorkerIdentity {
        id: Uuid::now_v7(),
        name: name.into(),
    };
    let (mine, other) = (identity("mine"), identity("other"));
    for worker in [&mine, &other] {
        sqlx::query(
            "INSERT INTO workers (id, name, host, pid, groups, kinds, concurrency, status, version)
             VALUES ($1, $2, 'here', 1, '{default}', '{noop}', 1, 'online', 'test')",
        )
        .bind(worker.id)
        .bind(&worker.name)
        .execute(env.store.pool())
        .await?;
    }
    let (_, message) = chime_core::store::task_lifecycle::recorded_attempt(&env.store, task.id)
        .await?
        .context("the task's row")?;
    let start = |worker: &chime_core::store::task_lifecycle::WorkerIdentity, n: usize| {
        let (store, worker) = (env.store.clone(), worker.clone());
        let asks = vec![message.clone(); n];
        async move {
            let started =
                chime_core::store::task_lifecycle::start_attempts(&store, &worker, &asks).await?;
            Ok::<_, anyhow::Error>(
                started
                    .into_iter()
                    .map(|m| (m.task_id, m.attempt))
                    .collect::<Vec<_>>(),
            )
        }
    };
    assert_eq!(
        start(&mine, 2).await?,
        vec![(task.id, 1)],
        "one batch, one yes"
    );
    assert_eq!(
        start(&mine, 1).await?,
        vec![(task.id, 1)],
        "asked again: still mine"
    );
    assert!(
        start(&identity("other"), 1).await?.is_empty(),
        "not another's"
    );
    // One attempt, running under its worker, however often its start was asked for.
    let attempts = env.task(task.id).await?.attempts;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].outcome, None);
    assert_eq!(attempts[0].worker.as_deref(), Some("mine"));
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_with_a_nul_byte_is_recorded() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    // PostgreSQL's jsonb cannot hold NUL: it is stored as U+FFFD, and the task still ends.
    let id = env
        .submit(&["--kind", "shell", "--script", r"printf 'a\000b'"])
        .await?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.result.map(|r| r.output), Some("a\u{FFFD}b".into()));
    env.cleanup().await
}
