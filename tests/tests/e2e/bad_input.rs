//! Bad input gets a clear error and changes nothing.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::model::MAX_PAYLOAD_BYTES;
use chime_tests::TestEnv;

async fn task_count(env: &TestEnv) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(env.store.pool())
        .await?)
}

fn assert_error(out: &std::process::Output, needle: &str) {
    assert!(!out.status.success(), "expected failure: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no `error: …` line in {stderr:?}"));
    assert!(line.contains(needle), "{line:?} should mention {needle:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_submit_refuses_bad_input_and_writes_nothing() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let no_command = env.chime(&["submit", "--kind", "shell"]).await?;
    assert_error(&no_command, "needs a command");

    let unknown = env
        .chime(&["submit", "--kind", "teleport", "--", "x"])
        .await?;
    assert_error(&unknown, "only the shell kind");
    let unknown = env.chime(&["submit", "--kind", "teleport"]).await?;
    assert_error(&unknown, "unknown kind \"teleport\"");

    let big = std::env::temp_dir().join(format!("chime-big-{}.json", uuid::Uuid::now_v7()));
    std::fs::write(
        &big,
        serde_json::to_vec(&"x".repeat(MAX_PAYLOAD_BYTES + 1))?,
    )?;
    let data = format!("@{}", big.display());
    let too_large = env
        .chime(&["submit", "--kind", "noop", "--data", &data])
        .await?;
    let _ = std::fs::remove_file(&big);
    assert_error(&too_large, "payload too large");

    let bad_json = env
        .chime(&["submit", "--kind", "noop", "--spec", "{nope"])
        .await?;
    assert_error(&bad_json, "--spec is not valid JSON");

    assert_eq!(task_count(&env).await?, 0);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_answers_4xx_with_a_json_error() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    // No connection reuse: the server answers an oversized body with 413 and closes the
    // connection without reading the rest, and a pooled connection would carry the next request
    // into that close.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let url = format!("{}/api/v1/tasks", env.api_url());
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            client
                .post(&url)
                .header("content-type", "application/json")
                .body("not json"),
            400,
            "parse",
        ),
        (
            client
                .post(&url)
                .json(&serde_json::json!({"kind": "teleport"})),
            400,
            "unknown kind",
        ),
        (
            client
                .post(&url)
                .json(&serde_json::json!({"kind": "shell", "spec": {"command": []}})),
            400,
            "needs a command",
        ),
        (
            client
                .post(&url)
                .json(&serde_json::json!({"kind": "noop", "bogus": 1})),
            422,
            "unknown field",
        ),
        (
            client
                .post(&url)
                .json(&serde_json::json!({"kind": "noop", "data": "x".repeat(MAX_PAYLOAD_BYTES)})),
            413,
            "payload too large",
        ),
        (
            client.post(&url).json(
                &serde_json::json!({"kind": "noop", "data": "x".repeat(3 * MAX_PAYLOAD_BYTES)}),
            ),
            413,
            "length limit",
        ),
        (
            client.get(format!("{url}/not-a-uuid")),
            400,
            "not a task id",
        ),
        (
            client.get(format!("{url}/{}", uuid::Uuid::now_v7())),
            404,
            "not found",
        ),
        (
            client.get(format!("{url}?status=sleeping")),
            400,
            "unknown task status",
        ),
    ];
    for (request, status, needle) in cases {
        let response = request.send().await?;
        assert_eq!(response.status().as_u16(), status);
        let body: serde_json::Value = response.json().await?;
        let error = body["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(needle),
            "{error:?} should mention {needle:?}"
        );
    }
    assert_eq!(task_count(&env).await?, 0);
    env.cleanup().await
}
