//! Failure webhooks: delivered once a task fails for good, retried across a receiver outage.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::model::TaskStatus;
use chime_tests::{TestEnv, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Answers every POST 200 and keeps its body.
async fn receiver(listener: tokio::net::TcpListener, bodies: Arc<Mutex<Vec<serde_json::Value>>>) {
    while let Ok((mut socket, _)) = listener.accept().await {
        let bodies = bodies.clone();
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // Headers, then as much body as Content-Length says.
            loop {
                let Ok(n) = socket.read(&mut buffer).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                request.extend_from_slice(&buffer[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        if let Ok(json) = serde_json::from_str(&body[..length])
                            && let Ok(mut bodies) = bodies.lock()
                        {
                            bodies.push(json);
                        }
                        break;
                    }
                }
            }
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                .await;
            let _ = socket.shutdown().await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_webhook_is_delivered_once_and_retried_across_a_receiver_outage() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    // The receiver's port, with nothing listening on it yet: the outage.
    let port = chime_tests::free_port()?;
    let url = format!("http://127.0.0.1:{port}/chime");
    for job in ["nightly", "other"] {
        env.chime_ok(&[
            "job",
            "create",
            job,
            "--kind",
            "shell",
            "--script",
            "echo disk full >&2; exit 3",
        ])
        .await?;
    }
    env.chime_ok(&["webhook", "add", &url]).await?;
    // A webhook for another job hears nothing of this one's failure.
    let other_port = chime_tests::free_port()?;
    env.chime_ok(&[
        "webhook",
        "add",
        &format!("http://127.0.0.1:{other_port}/"),
        "--job",
        "other",
    ])
    .await?;
    let id = env.chime_ok(&["job", "run", "nightly"]).await?;
    let task = env.wait_terminal(id.parse()?).await?;
    assert_eq!(task.status, TaskStatus::Failed);

    // Tried while the receiver is down, and kept.
    eventually("a failed delivery try", || async {
        let tried: Option<(i32, Option<String>)> = sqlx::query_as(
            "SELECT attempts, last_error FROM webhook_deliveries d JOIN webhooks w
             ON w.id = d.webhook_id WHERE w.url = $1",
        )
        .bind(&url)
        .fetch_optional(env.store.pool())
        .await?;
        Ok(tried.is_some_and(|(attempts, error)| attempts >= 1 && error.is_some()))
    })
    .await?;
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    tokio::spawn(receiver(listener, bodies.clone()));
    eventually("the delivery once the receiver is back", || async {
        Ok(bodies.lock().map(|b| !b.is_empty()).unwrap_or(false))
    })
    .await?;
    // The receiver has the body before the sender commits that it delivered it.
    eventually("the delivery recorded", || async {
        let delivered: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NOT NULL",
        )
        .fetch_one(env.store.pool())
        .await?;
        Ok(delivered == 1)
    })
    .await?;
    let body = bodies.lock().map(|b| b.clone()).unwrap_or_default();
    assert_eq!(body.len(), 1, "delivered once: {body:?}");
    assert_eq!(body[0]["event"], "task.failed");
    assert_eq!(body[0]["task_id"], id);
    assert_eq!(body[0]["job"], "default.nightly");
    assert_eq!(body[0]["exit_code"], 3);
    let listed = env.chime_ok(&["webhook", "list"]).await?;
    assert!(!listed.is_empty());
    let pending_for_other: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
         WHERE w.job_id IS NOT NULL",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(
        pending_for_other, 0,
        "the other job's webhook heard nothing"
    );
    env.cleanup().await
}

/// A job that has not succeeded within its window (`--expect-success-within`) is notified once
/// per missed deadline, to its own webhooks and the global ones; a success moves the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_success_window_is_notified_once_per_deadline() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    env.chime_ok(&[
        "job",
        "create",
        "report",
        "--kind",
        "noop",
        "--expect-success-within",
        "3s",
    ])
    .await?;
    let shown = env.chime(&["job", "show", "report"]).await?;
    let shown = String::from_utf8(shown.stdout)?;
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(receiver(listener, bodies.clone()));
    env.chime_ok(&["webhook", "add", &url, "--job", "report"])
        .await?;
    let overdue = || {
        bodies
            .lock()
            .map(|b| {
                b.iter()
                    .filter(|b| b["event"] == "job.success_overdue")
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    eventually("the first missed window", || async {
        Ok(overdue().len() == 1)
    })
    .await?;
    let first = overdue().remove(0);
    assert_eq!(first["job"], "default.report", "{first}");
    assert_eq!(first["expect_success_within_ms"], 3000, "{first}");
    assert!(first["last_success_at"].is_null(), "{first}");

    // A success moves the deadline; missing the next one is told once more.
    let id = env.chime_ok(&["job", "run", "report"]).await?;
    assert_eq!(
        env.wait_terminal(id.parse()?).await?.status,
        TaskStatus::Succeeded
    );
    eventually("the second missed window", || async {
        Ok(overdue().len() == 2)
    })
    .await?;
    let second = overdue().remove(1);
    assert!(second["last_success_at"].is_string(), "{second}");
    assert_ne!(first["deadline"], second["deadline"]);
    let notified: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_deliveries WHERE body->>'event' = 'job.success_overdue'",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(notified, 2, "one delivery per missed deadline");
    assert!(
        shown.contains("within 3s"),
        "job show names the window: {shown}"
    );
    env.cleanup().await
}
