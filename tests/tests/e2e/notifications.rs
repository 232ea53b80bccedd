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

/// Accepts connections and never answers: a receiver that hangs.
async fn hanging(listener: tokio::net::TcpListener) {
    let mut held = Vec::new();
    while let Ok((socket, _)) = listener.accept().await {
        held.push(socket);
    }
}

/// Two receivers that hang do not hold up a healthy one: it gets every failure while the others
/// still hang (each try of theirs waits out the 10 s timeout; one at a time, 30 failures behind
/// two of them took minutes). A delivery that runs out of tries is given up, shown by `webhook
/// list` with its error (no secret of the URL in it) and pruned with the history; an http task's
/// failure tells the receivers its error without its URL's secrets; a URL that does not parse is
/// refused when the webhook is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_webhook_is_told_every_failure_while_two_others_hang() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.settings.worker.http_allow = vec!["127.0.0.1".into()];
    env.start(Services::ALL).await?;
    for _ in 0..2 {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        env.chime_ok(&[
            "webhook",
            "add",
            &format!("http://{}/", listener.local_addr()?),
        ])
        .await?;
        tokio::spawn(hanging(listener));
    }
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    env.chime_ok(&[
        "webhook",
        "add",
        &format!("http://{}/ok", listener.local_addr()?),
    ])
    .await?;
    tokio::spawn(receiver(listener, bodies.clone()));

    let mut failed = Vec::new();
    for _ in 0..30 {
        failed.push(env.submit(&["--kind", "shell", "--", "false"]).await?);
    }
    let told = || {
        bodies
            .lock()
            .map(|b| {
                b.iter()
                    .filter_map(|b| b["task_id"].as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    eventually("the healthy receiver told of all 30 failures", || async {
        Ok(told().len() >= 30)
    })
    .await?;
    let mut told = told();
    told.sort();
    told.dedup();
    let mut expected: Vec<String> = failed.iter().map(ToString::to_string).collect();
    expected.sort();
    assert_eq!(told, expected);
    let hung_delivered: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
         WHERE w.url NOT LIKE '%/ok' AND d.delivered_at IS NOT NULL",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(hung_delivered, 0, "the hanging receivers answered nothing");

    // An http task's failure: its error reaches the receivers without the URL's secrets.
    let closed = chime_tests::free_port()?;
    let spec = serde_json::json!({
        "url": format!("http://bot:hunter2@127.0.0.1:{closed}/hook?token=xoxb-secret")
    });
    let http = env
        .submit(&["--kind", "http", "--spec", &spec.to_string()])
        .await?;
    eventually("the http task's failure told", || async {
        Ok(bodies
            .lock()
            .map(|b| b.iter().any(|b| b["task_id"] == http.to_string()))
            .unwrap_or(false))
    })
    .await?;
    let payload = bodies
        .lock()
        .map(|b| b.iter().find(|b| b["task_id"] == http.to_string()).cloned())
        .ok()
        .flatten()
        .unwrap_or_default();
    let text = payload.to_string();
    assert!(
        payload["error"].is_string() && !text.contains("hunter2") && !text.contains("xoxb"),
        "{text}"
    );

    // A receiver gone for good: its delivery is given up after its last try.
    let gone = chime_tests::free_port()?;
    let secret_url = format!("http://bot:hunter2@127.0.0.1:{gone}/hook?token=xoxb-secret");
    let hook = env.chime_ok(&["webhook", "add", &secret_url]).await?;
    let last_try = chime_core::store::webhooks::MAX_ATTEMPTS - 1;
    sqlx::query(
        "INSERT INTO webhook_deliveries (webhook_id, body, attempts) VALUES ($1, '{}', $2)",
    )
    .bind(hook.parse::<i64>()?)
    .bind(last_try)
    .execute(env.store.pool())
    .await?;
    eventually("the last try given up", || async {
        let gave_up: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM webhook_deliveries WHERE gave_up_at IS NOT NULL",
        )
        .fetch_one(env.store.pool())
        .await?;
        Ok(gave_up == 1)
    })
    .await?;
    let out = env.chime(&["webhook", "list", "--json"]).await?;
    let listed = String::from_utf8(out.stdout)?;
    assert!(
        !listed.contains("hunter2") && !listed.contains("xoxb"),
        "no secret shown: {listed}"
    );
    let hooks: Vec<serde_json::Value> = serde_json::from_str(&listed)?;
    let shown = hooks
        .iter()
        .find(|h| h["id"].as_i64().map(|id| id.to_string()).as_deref() == Some(hook.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(shown["gave_up"], 1, "{shown}");
    assert_eq!(shown["pending"], 0, "{shown}");
    assert!(
        shown["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot reach the receiver")),
        "{shown}"
    );

    // Retention removes ended deliveries with the history.
    sqlx::query("UPDATE webhook_deliveries SET created_at = now() - interval '40 days'")
        .execute(env.store.pool())
        .await?;
    env.chime_ok(&["prune", "--older-than", "30d"]).await?;
    let left: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_deliveries
         WHERE delivered_at IS NOT NULL OR gave_up_at IS NOT NULL",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(left, 0, "ended deliveries pruned");

    for bad in ["http://", "ftp://example.com/x", "not a url"] {
        let out = env.chime(&["webhook", "add", bad]).await?;
        assert!(!out.status.success(), "{bad}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("url"), "{bad}: {stderr}");
    }
    env.cleanup().await
}
