//! Output while it runs and after: every attempt keeps its own output, a running task's output
//! is followed (`chime task logs -f`, `GET /api/v1/tasks/{id}/logs?follow=true`), and the task
//! list narrows by job, worker group, kind and age, page by page.

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_core::model::{TaskStatus, TaskSummary};
use chime_tests::{TestEnv, eventually, http, last_line};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_keeps_its_output_and_a_running_one_is_followed() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    // The first attempt fails at once; the second prints a line a second, then succeeds.
    let id = env
        .submit(&[
            "--kind",
            "shell",
            "--failed-retries",
            "1",
            "--failed-interval-ms",
            "100",
            "--script",
            r#"echo "attempt $CHIME_ATTEMPT begins"
               [ "$CHIME_ATTEMPT" -ge 2 ] || exit 3
               for i in 0 1 2 3; do echo "tick $i"; sleep 1; done"#,
        ])
        .await?;
    let id_text = id.to_string();
    let follower = tokio::spawn({
        let mut command = tokio::process::Command::new(chime_tests::chime_binary()?);
        command
            .args(["task", "logs", &id_text, "-f"])
            .env("CHIME_API_URL", env.api_url())
            .env("CHIME_CONFIG", "/nonexistent/chime.toml")
            .env_remove("CHIME_API_TOKEN")
            .kill_on_drop(true);
        async move { command.output().await }
    });

    // While the second attempt runs, its output so far is readable.
    let logs_url = format!("{}/api/v1/tasks/{id}/logs", env.api_url());
    eventually(
        "the running attempt's first ticks to be readable",
        || async {
            let task = env.task(id).await?;
            let text = http().get(&logs_url).send().await?.text().await?;
            Ok(task.status == TaskStatus::Running && text.contains("tick 1"))
        },
    )
    .await?;

    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    let first = task.attempts[0].output.as_deref().unwrap_or_default();
    let second = task.attempts[1].output.as_deref().unwrap_or_default();
    assert_eq!(first.trim(), "attempt 1 begins");
    assert!(
        second.contains("attempt 2 begins") && second.contains("tick 3"),
        "{second:?}"
    );

    let followed = follower.await??;
    assert!(followed.status.success(), "{followed:?}");
    let stdout = String::from_utf8_lossy(&followed.stdout);
    let stderr = String::from_utf8_lossy(&followed.stderr);
    for tick in 0..4 {
        assert!(stdout.contains(&format!("tick {tick}\n")), "{stdout:?}");
    }
    assert_eq!(
        stdout.matches("tick 2").count(),
        1,
        "printed once: {stdout:?}"
    );
    assert!(stderr.contains("succeeded"), "{stderr:?}");

    let out = env
        .chime(&["task", "logs", &id_text, "--attempt", "1"])
        .await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "attempt 1 begins"
    );
    let out = env
        .chime(&["task", "logs", &id_text, "--attempt", "3"])
        .await?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no attempt 3"),
        "{out:?}"
    );
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_list_narrows_by_kind_group_and_age_and_pages() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let mut noops = Vec::new();
    for _ in 0..3 {
        noops.push(env.submit(&["--kind", "noop"]).await?);
    }
    let shell = env.submit(&["--kind", "shell", "--script", "true"]).await?;
    for id in noops.iter().chain([&shell]) {
        env.wait_terminal(*id).await?;
    }
    let list = |query: &'static str| {
        let url = format!("{}/api/v1/tasks?{query}", env.api_url());
        async move {
            let tasks: Vec<TaskSummary> = http().get(&url).send().await?.json().await?;
            anyhow::Ok(tasks.into_iter().map(|t| t.id).collect::<Vec<_>>())
        }
    };
    let newest_first: Vec<_> = noops.iter().rev().copied().collect();
    assert_eq!(list("kind=noop").await?, newest_first);
    assert_eq!(list("kind=shell&worker_group=default").await?, vec![shell]);
    assert_eq!(
        list("worker_group=elsewhere").await?,
        Vec::<uuid::Uuid>::new()
    );
    assert_eq!(list("kind=noop&limit=2").await?, newest_first[..2]);
    let next = format!("kind=noop&limit=2&before={}", newest_first[1]);
    let next: &'static str = Box::leak(next.into_boxed_str());
    assert_eq!(list(next).await?, newest_first[2..]);
    assert_eq!(
        list("since=2999-01-01T00:00:00Z").await?,
        Vec::<uuid::Uuid>::new()
    );
    let bad = http()
        .get(format!("{}/api/v1/tasks?since=yesterday", env.api_url()))
        .send()
        .await?;
    assert_eq!(bad.status(), 400);

    let out = env
        .chime(&["task", "list", "--kind", "noop", "--since", "1h", "--json"])
        .await?;
    assert!(out.status.success(), "{out:?}");
    let listed: Vec<TaskSummary> =
        serde_json::from_slice(&out.stdout).context("task list --json")?;
    assert_eq!(listed.len(), 3);
    let out = env
        .chime(&["task", "list", "--text", "NOOP", "--json"])
        .await?;
    let listed: Vec<TaskSummary> = serde_json::from_slice(&out.stdout).context("--text")?;
    assert_eq!(
        listed.len(),
        3,
        "the text matches the kind, case-insensitively"
    );
    let out = env
        .chime(&[
            "task",
            "list",
            "--data-time-from",
            "2999-01-01T00:00:00Z",
            "--json",
        ])
        .await?;
    let listed: Vec<TaskSummary> =
        serde_json::from_slice(&out.stdout).context("--data-time-from")?;
    assert!(listed.is_empty(), "{listed:?}");
    let out = env.chime(&["task", "list", "--since", "soon"]).await?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("error: --since"),
        "{out:?}"
    );
    env.cleanup().await
}

/// A dashboard left open (its live feed) and a follower of a task that never ends do not hold
/// the API up when it stops: their streams end with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_end_when_the_api_stops() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let id = env
        .submit(&["--kind", "shell", "--script", "sleep 600"])
        .await?;
    let feed = http()
        .get(format!("{}/api/v1/events", env.api_url()))
        .send()
        .await?;
    let logs = http()
        .get(format!(
            "{}/api/v1/tasks/{id}/logs?follow=true",
            env.api_url()
        ))
        .send()
        .await?;
    anyhow::ensure!(feed.status().is_success() && logs.status().is_success());
    tokio::time::timeout(std::time::Duration::from_secs(60), env.stop())
        .await
        .context("the services did not stop with streams open")??;
    // Both streams were ended by the server, not left hanging.
    for (what, stream) in [("events", feed), ("logs", logs)] {
        let ended = tokio::time::timeout(std::time::Duration::from_secs(30), stream.bytes()).await;
        assert!(ended.is_ok(), "the {what} stream was not ended");
    }
    env.cleanup().await
}

/// stdout and stderr are kept in the order the command wrote them, however fast it alternates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_keep_the_order_they_were_written_in() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let out = env
        .chime(&[
            "submit",
            "--kind",
            "shell",
            "--script",
            "for i in 1 2 3 4 5 6 7 8 9 10; do echo out$i; echo err$i >&2; done",
        ])
        .await?;
    anyhow::ensure!(out.status.success(), "{out:?}");
    let task = env.wait_terminal(last_line(&out).parse()?).await?;
    let expected: String = (1..=10).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(task.result.map(|r| r.output).unwrap_or_default(), expected);
    env.cleanup().await
}
