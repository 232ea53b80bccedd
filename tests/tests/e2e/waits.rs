//! `POST /api/v1/tasks/wait`: a client waiting for tasks gets each one's end as it comes (the
//! whole task, its result included), an id no task has named, and `done` when all have ended.

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_tests::{TestEnv, http};
use serde_json::{Value, json};
use uuid::Uuid;

/// Reads server-sent events until `done` (or 60 s): each as (event, data).
async fn events(mut response: reqwest::Response) -> Result<Vec<(String, Value)>> {
    let mut text = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let mut name = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            if name.is_empty() {
                continue;
            }
            let done = name == "done";
            events.push((name, serde_json::from_str(&data)?));
            if done {
                return Ok(events);
            }
        }
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .context("no `done` within 60 s")??
            .context("the stream ended before `done`")?;
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_tasks_streams_each_end_then_done() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let slow = env
        .submit(&[
            "--kind",
            "shell",
            "--script",
            r#"sleep 1; echo '{"n": 1}' > "$CHIME_RESULT_FILE""#,
        ])
        .await?;
    let failing = env
        .submit(&["--kind", "shell", "--script", "echo broken; exit 3"])
        .await?;
    let nobody = Uuid::now_v7();
    let response = http()
        .post(format!("{}/api/v1/tasks/wait", env.api_url()))
        .json(&json!({"ids": [slow, failing, nobody]}))
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    let got = events(response).await?;
    let ended: Vec<&Value> = got
        .iter()
        .filter(|(name, _)| name == "ended")
        .map(|(_, task)| task)
        .collect();
    assert_eq!(ended.len(), 2, "{got:?}");
    let of = |id: Uuid| {
        ended
            .iter()
            .find(|t| t["id"] == json!(id))
            .copied()
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(of(slow)["status"], "succeeded");
    assert_eq!(of(slow)["result"]["value"], json!({"n": 1}));
    assert_eq!(of(failing)["status"], "failed");
    assert_eq!(of(failing)["result"]["exit_code"], 3);
    assert!(
        got.iter()
            .any(|(name, data)| name == "missing" && data["id"] == json!(nobody)),
        "{got:?}"
    );
    assert_eq!(got.last().map(|(name, _)| name.as_str()), Some("done"));

    // Asked again once they have ended, the ends come at once.
    let response = http()
        .post(format!("{}/api/v1/tasks/wait", env.api_url()))
        .json(&json!({"ids": [slow]}))
        .send()
        .await?;
    let again = events(response).await?;
    assert_eq!(again.len(), 2, "{again:?}");

    // A bad request is refused, naming the field.
    let refused = http()
        .post(format!("{}/api/v1/tasks/wait", env.api_url()))
        .json(&json!({"ids": []}))
        .send()
        .await?;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await?.contains("ids"));
    env.cleanup().await
}
