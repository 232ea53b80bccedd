//! A task's result value: what a shell task writes to `$CHIME_RESULT_FILE` (JSON, up to the
//! worker's limit), kept with its attempt and shown by the API and `chime task show`.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::model::TaskStatus;
use chime_tests::TestEnv;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_tasks_result_file_is_its_result() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let script = |text: &str| ["--kind", "shell", "--script", text].map(String::from);
    let submit = |args: [String; 4]| {
        let env = &env;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            env.submit(&args).await
        }
    };
    let good = submit(script(
        r#"echo counting; echo '{"rows": 42}' > "$CHIME_RESULT_FILE""#,
    ))
    .await?;
    let silent = submit(script("echo no result")).await?;
    let failed = submit(script(
        r#"echo '{"partial": true}' > "$CHIME_RESULT_FILE"; exit 3"#,
    ))
    .await?;
    let not_json = submit(script(r#"echo '{"rows":' > "$CHIME_RESULT_FILE""#)).await?;
    let too_large = submit(script(
        r#"head -c 1100000 /dev/zero | tr '\0' 1 > "$CHIME_RESULT_FILE""#,
    ))
    .await?;

    let task = env.wait_terminal(good).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    let result = task.result.clone().unwrap_or_default();
    assert_eq!(result.value, Some(json!({"rows": 42})));
    assert!(result.output.contains("counting"));
    assert_eq!(
        task.attempts[0].value,
        Some(json!({"rows": 42})),
        "kept with the attempt"
    );
    let shown = env.chime(&["task", "show", &good.to_string()]).await?;
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains(r#"{"rows":42}"#), "{shown}");

    let task = env.wait_terminal(silent).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.result.unwrap_or_default().value, None);

    // A failed command's result is kept; it does not make the attempt succeed.
    let task = env.wait_terminal(failed).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    let result = task.result.unwrap_or_default();
    assert_eq!(
        (result.exit_code, result.value),
        (Some(3), Some(json!({"partial": true})))
    );

    let task = env.wait_terminal(not_json).await?;
    assert_eq!(task.status, TaskStatus::Failed, "{task:?}");
    let error = task.result.unwrap_or_default().error.unwrap_or_default();
    assert!(error.contains("is not JSON"), "{error}");

    let task = env.wait_terminal(too_large).await?;
    assert_eq!(task.status, TaskStatus::Failed, "{task:?}");
    let error = task.result.unwrap_or_default().error.unwrap_or_default();
    assert!(
        error.contains("more than 1048576 bytes") && error.contains("worker.result_max_bytes"),
        "{error}"
    );
    env.cleanup().await
}
