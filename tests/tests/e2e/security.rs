//! Safe by default: who may call what, what a task can see and become, and what the API and the
//! broker refuse. Each test is one of the ways in an attacker would try.

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_core::bus::Topology;
use chime_core::config::AmqpUser;
use chime_core::model::message::SubmitMessage;
use chime_core::model::{NewTask, Role, TaskStatus};
use chime_core::store::{task_lifecycle, tokens};
use chime_tests::{TestEnv, eventually, free_port, http, last_line, wait_dead_letters};
use lapin::BasicProperties;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

async fn token(env: &TestEnv, name: &str, role: Role, execute_users: &[&str]) -> Result<String> {
    let users: Vec<String> = execute_users.iter().map(|u| u.to_string()).collect();
    Ok(tokens::create(&env.store, name, role, &users, "test")
        .await?
        .secret)
}

async fn status_of(request: reqwest::RequestBuilder) -> Result<StatusCode> {
    Ok(request.send().await?.status())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_every_call_needs_one_and_each_role_only_its_own() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let api = env.api_url().to_string();
    let client = http();
    let reader = token(&env, "dash", Role::Read, &[]).await?;
    let operator = token(&env, "ci", Role::Operate, &["daemon"]).await?;
    let admin = token(&env, "ops", Role::Admin, &[]).await?;

    // Without a token: only the health checks and the dashboard's empty page.
    for path in [
        "/api/v1/tasks",
        "/api/v1/jobs",
        "/api/v1/workers",
        "/api/v1/openapi.json",
        "/metrics",
    ] {
        let status = status_of(client.get(format!("{api}{path}"))).await?;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    for path in ["/healthz", "/readyz", "/"] {
        assert_eq!(
            status_of(client.get(format!("{api}{path}"))).await?,
            StatusCode::OK
        );
    }
    let noop = json!({"kind": "noop"});
    let submit = |secret: &str, body: &serde_json::Value| {
        client
            .post(format!("{api}/api/v1/tasks"))
            .bearer_auth(secret)
            .json(body)
    };
    assert_eq!(
        status_of(client.post(format!("{api}/api/v1/tasks")).json(&noop)).await?,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status_of(submit("chime_not-a-token", &noop)).await?,
        StatusCode::UNAUTHORIZED
    );

    // read: reads, cannot submit.
    assert_eq!(
        status_of(
            client
                .get(format!("{api}/api/v1/tasks"))
                .bearer_auth(&reader)
        )
        .await?,
        StatusCode::OK
    );
    let refused = submit(&reader, &noop).send().await?;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let body: serde_json::Value = refused.json().await?;
    assert!(
        body["error"].as_str().unwrap_or("").contains("operate"),
        "{body}"
    );

    // operate: submits (recorded as its name), only as its execute users; cannot create a job.
    let created = submit(&operator, &noop).send().await?;
    assert_eq!(created.status(), StatusCode::CREATED);
    let id: Uuid = created.json::<serde_json::Value>().await?["id"]
        .as_str()
        .context("an id")?
        .parse()?;
    let submit_user: Option<String> =
        sqlx::query_scalar("SELECT submit_user FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_one(env.store.pool())
            .await?;
    assert_eq!(submit_user.as_deref(), Some("ci"));
    let as_root = json!({"kind": "noop", "execute_user": "root"});
    assert_eq!(
        status_of(submit(&operator, &as_root)).await?,
        StatusCode::FORBIDDEN
    );
    let as_daemon = json!({"kind": "noop", "execute_user": "daemon"});
    assert_eq!(
        status_of(submit(&operator, &as_daemon)).await?,
        StatusCode::CREATED
    );
    let job = json!({"name": "nightly", "kind": "noop"});
    let create_job = |secret: &str| {
        client
            .post(format!("{api}/api/v1/jobs"))
            .bearer_auth(secret)
            .json(&job)
    };
    assert_eq!(
        status_of(create_job(&operator)).await?,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status_of(
            client
                .get(format!("{api}/api/v1/tokens"))
                .bearer_auth(&operator)
        )
        .await?,
        StatusCode::FORBIDDEN
    );
    env.wait_terminal(id).await?;
    let rerun = client
        .post(format!("{api}/api/v1/tasks/{id}/rerun"))
        .bearer_auth(&operator);
    assert_eq!(status_of(rerun).await?, StatusCode::OK);

    // admin: changes the schedule, and manages tokens from the CLI.
    assert_eq!(status_of(create_job(&admin)).await?, StatusCode::CREATED);
    let out = env
        .chime(&[
            "--token",
            &admin,
            "token",
            "create",
            "nightly-bot",
            "--role",
            "read",
        ])
        .await?;
    assert!(out.status.success(), "{out:?}");
    let secret = last_line(&out);
    assert!(secret.starts_with("chime_"), "{secret}");
    assert_eq!(
        status_of(
            client
                .get(format!("{api}/api/v1/jobs"))
                .bearer_auth(&secret)
        )
        .await?,
        StatusCode::OK
    );
    // A token gives no more than its creator has, and reserved names are refused.
    let limited = token(&env, "limited-admin", Role::Admin, &[]).await?;
    let wider = client
        .post(format!("{api}/api/v1/tokens"))
        .bearer_auth(&limited)
        .json(&json!({"name": "wide", "role": "operate", "execute_users": ["*"]}));
    assert_eq!(status_of(wider).await?, StatusCode::FORBIDDEN);
    let reserved = env
        .chime(&[
            "--token", &admin, "token", "create", "local", "--role", "read",
        ])
        .await?;
    assert!(!reserved.status.success(), "{reserved:?}");
    let listed = env.chime(&["--token", &admin, "token", "list"]).await?;
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(
        listed.contains("nightly-bot") && !listed.contains(&secret),
        "{listed}"
    );

    // The audit trail names who re-ran the task and who created the job.
    let out = env.chime(&["--token", &admin, "audit", "--json"]).await?;
    assert!(out.status.success(), "{out:?}");
    let events: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
    let seen = |actor: &str, target: &str| {
        events
            .iter()
            .any(|e| e["actor"] == actor && e["target"].as_str().is_some_and(|t| t == target))
    };
    assert!(
        seen("ci", &format!("/api/v1/tasks/{id}/rerun")),
        "{events:?}"
    );
    assert!(seen("ops", "/api/v1/jobs"), "{events:?}");
    assert!(seen("ops", "/api/v1/tokens"), "{events:?}");

    // A revoked token stops working at once.
    let out = env
        .chime(&["--token", &admin, "token", "revoke", "ci"])
        .await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        status_of(submit(&operator, &noop)).await?,
        StatusCode::UNAUTHORIZED
    );
    env.cleanup().await
}

/// With no token, the API on loopback is the operator's alone: a web page they visit cannot
/// drive it (cross-site form posts) or read it (DNS rebinding, another Host).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_no_web_page_can_drive_the_loopback_api() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let api = env.api_url().to_string();
    let host = api.trim_start_matches("http://").to_string();
    let client = http();
    let pause = format!("{api}/api/v1/trigger-groups/default/pause");
    let form = || {
        client
            .post(&pause)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("x=1")
    };
    let refused = form().header("origin", "http://evil.example");
    assert_eq!(status_of(refused).await?, StatusCode::FORBIDDEN);
    let refused = form().header("sec-fetch-site", "cross-site");
    assert_eq!(status_of(refused).await?, StatusCode::FORBIDDEN);
    let rebound = client
        .get(format!("{api}/api/v1/tasks"))
        .header("host", "evil.example");
    assert_eq!(status_of(rebound).await?, StatusCode::FORBIDDEN);
    for (name, value) in [
        ("x-forwarded-for", "203.0.113.9"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-port", "443"),
        ("x-forwarded-prefix", "/chime"),
        ("via", "1.1 proxy"),
        ("forwarded", "for=203.0.113.9"),
        ("x-real-ip", "203.0.113.9"),
    ] {
        let proxied = client
            .get(format!("{api}/api/v1/tasks"))
            .header(name, value);
        assert_eq!(status_of(proxied).await?, StatusCode::FORBIDDEN, "{name}");
    }
    let paused: i64 = sqlx::query_scalar("SELECT count(*) FROM paused_trigger_groups")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(paused, 0, "a refused call changed nothing");

    // The dashboard itself (same origin) and the CLI (no Origin) still work.
    let same_origin = client
        .post(&pause)
        .header("origin", format!("http://{host}"))
        .header("sec-fetch-site", "same-origin");
    assert!(status_of(same_origin).await?.is_success());
    let out = env.chime(&["workers"]).await?;
    assert!(out.status.success(), "{out:?}");
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_refuses_to_listen_beyond_loopback_without_a_token() -> Result<()> {
    let env = TestEnv::new().await?;
    let addr = format!("0.0.0.0:{}", free_port()?);
    let out = env.chime(&["api", "--api-addr", &addr]).await?;
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(
        line.contains("refusing to listen") && line.contains("CHIME_API_TOKEN"),
        "{stderr}"
    );
    env.cleanup().await
}

/// A task sees a clean environment (never the worker's settings and secrets) and, on a root
/// worker, is not root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_sees_no_secret_of_its_worker_and_is_not_root() -> Result<()> {
    let env = TestEnv::new().await?;
    let _worker = env.spawn_chime_with(
        &["worker"],
        &[
            ("CHIME_API_TOKEN", "worker-secret-token"),
            ("LEAKED_BY_INHERITANCE", "1"),
            ("TZ", "Europe/Paris"),
            ("CHIME_WORKER__PASS_ENV", "TZ"),
        ],
    )?;
    let topology = Topology::new(env.settings.prefix.clone());
    let env_task = task_lifecycle::submit(
        &env.store,
        &topology,
        NewTask {
            kind: "shell".into(),
            spec: json!({"command": ["env"], "env": {"MINE": "yes"}}),
            data_time: Some("2026-01-01T00:00:00Z".parse()?),
            ..NewTask::default()
        },
    )
    .await?;
    let id_task = task_lifecycle::submit(
        &env.store,
        &topology,
        NewTask {
            kind: "shell".into(),
            spec: json!({"command": ["id", "-u"]}),
            ..NewTask::default()
        },
    )
    .await?;
    let task = env.wait_terminal(env_task.id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    let output = task.result.map(|r| r.output).unwrap_or_default();
    let allowed = [
        "PATH",
        "LANG",
        "HOME",
        "USER",
        "LOGNAME",
        "MINE",
        "TZ",
        "CHIME_TASK_ID",
        "CHIME_ATTEMPT",
        "CHIME_DATA",
        "CHIME_DATA_TIME",
        // The file the task may write its result to (its own, removed after the attempt).
        "CHIME_RESULT_FILE",
    ];
    let names: Vec<&str> = output
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    for name in &names {
        assert!(
            allowed.contains(name),
            "{name} leaked into the task: {output}"
        );
    }
    for name in ["MINE", "TZ", "CHIME_TASK_ID", "CHIME_DATA_TIME", "PATH"] {
        assert!(names.contains(&name), "{name} missing: {output}");
    }
    assert!(!output.contains("worker-secret-token"), "{output}");
    let task = env.wait_terminal(id_task.id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    if nix::unistd::Uid::effective().is_root() {
        let uid = task.result.map(|r| r.output).unwrap_or_default();
        assert_ne!(uid.trim(), "0", "a task without execute_user ran as root");
    }
    env.cleanup().await
}

/// Data too large for a variable reaches the task in a file; an argument the kernel would refuse
/// is refused at submission, not an E2BIG at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_data_goes_in_a_file_and_an_oversized_argument_is_refused() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let big = "x".repeat(300 * 1024);
    let response = http()
        .post(format!("{}/api/v1/tasks", env.api_url()))
        .json(&json!({
            "kind": "shell",
            "spec": {"command": "test -z \"$CHIME_DATA\" && wc -c < \"$CHIME_DATA_FILE\""},
            "data": {"blob": big},
        }))
        .send()
        .await?;
    assert_eq!(response.status(), StatusCode::CREATED);
    let id: Uuid = response.json::<serde_json::Value>().await?["id"]
        .as_str()
        .context("an id")?
        .parse()?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    let size: usize = task
        .result
        .map(|r| r.output)
        .unwrap_or_default()
        .trim()
        .parse()?;
    assert!(size > 300 * 1024, "{size}");

    let response = http()
        .post(format!("{}/api/v1/tasks", env.api_url()))
        .json(&json!({
            "kind": "shell",
            "spec": {"command": ["true"], "env": {"BIG": big}},
        }))
        .send()
        .await?;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = response.json().await?;
    assert!(
        body["error"].as_str().unwrap_or("").contains("env.BIG"),
        "{body}"
    );
    env.cleanup().await
}

async fn publish_submission(env: &TestEnv, task: NewTask, user_id: Option<&str>) -> Result<()> {
    let topology = Topology::new(env.settings.prefix.clone());
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let mut properties =
        BasicProperties::default().with_message_id(Uuid::now_v7().to_string().into());
    if let Some(user) = user_id {
        properties = properties.with_user_id(user.into());
    }
    channel
        .basic_publish(
            topology.submit_exchange().into(),
            topology.submit_exchange().into(),
            BasicPublishOptions::default(),
            &SubmitMessage(task).encode(),
            properties,
        )
        .await?
        .await?;
    let _ = conn.close(200, "done".into()).await;
    Ok(())
}

/// With authentication on, an AMQP submission must carry a broker-validated `user_id` that chime
/// maps to a role; the task records it as its submitter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_submissions_need_a_mapped_broker_user_when_auth_is_on() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let user = chime_tests::broker_user();
    env.settings.amqp_users.insert(
        user.clone(),
        AmqpUser {
            role: Role::Operate,
            execute_users: Vec::new(),
        },
    );
    env.start(Services::ALL).await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let noop = |id: Uuid| NewTask {
        id: Some(id),
        kind: "noop".into(),
        ..NewTask::default()
    };
    let anonymous = Uuid::now_v7();
    publish_submission(&env, noop(anonymous), None).await?;
    let as_root = Uuid::now_v7();
    publish_submission(
        &env,
        NewTask {
            execute_user: Some("root".into()),
            ..noop(as_root)
        },
        Some(&user),
    )
    .await?;
    let mapped = Uuid::now_v7();
    publish_submission(&env, noop(mapped), Some(&user)).await?;

    let task = env.wait_terminal(mapped).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    let submit_user: Option<String> =
        sqlx::query_scalar("SELECT submit_user FROM tasks WHERE id = $1")
            .bind(mapped)
            .fetch_one(env.store.pool())
            .await?;
    assert_eq!(submit_user.as_deref(), Some(user.as_str()));
    let reasons = wait_dead_letters(&topology, 2).await?;
    assert!(reasons.iter().any(|r| r.contains("user_id")), "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r.contains("execute_user \"root\"")),
        "{reasons:?}"
    );
    for refused in [anonymous, as_root] {
        assert!(
            task_lifecycle_missing(&env, refused).await?,
            "{refused} was written"
        );
    }
    env.cleanup().await
}

async fn task_lifecycle_missing(env: &TestEnv, id: Uuid) -> Result<bool> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE id = $1")
        .bind(id)
        .fetch_one(env.store.pool())
        .await?;
    Ok(n == 0)
}

/// A worker group is declared before anything is sent to it: a typo is an error everywhere, and
/// makes no queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_worker_group_is_refused_everywhere_and_makes_no_queue() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let api = env.api_url().to_string();
    let client = http();
    let response = client
        .post(format!("{api}/api/v1/tasks"))
        .json(&json!({"kind": "noop", "group": "nosuchgroup"}))
        .send()
        .await?;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: serde_json::Value = response.json().await?;
    assert!(
        body["error"]
            .as_str()
            .unwrap_or("")
            .contains("chime group create nosuchgroup"),
        "{body}"
    );
    let out = env
        .chime(&["submit", "--kind", "noop", "--worker-group", "nosuchgroup"])
        .await?;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error: unknown worker group"),
        "{out:?}"
    );
    let job = client
        .post(format!("{api}/api/v1/jobs"))
        .json(&json!({"name": "j", "kind": "noop", "worker_group": "nosuchgroup"}));
    assert_eq!(status_of(job).await?, StatusCode::UNPROCESSABLE_ENTITY);
    let out = env.chime(&["route", "set", "hive", "nosuchgroup"]).await?;
    assert!(!out.status.success(), "{out:?}");
    let over_amqp = Uuid::now_v7();
    publish_submission(
        &env,
        NewTask {
            id: Some(over_amqp),
            kind: "noop".into(),
            group: Some("nosuchgroup".into()),
            ..NewTask::default()
        },
        None,
    )
    .await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let reasons = wait_dead_letters(&topology, 1).await?;
    assert!(reasons[0].contains("unknown worker group"), "{reasons:?}");
    let tasks: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(tasks, 0);
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    let queue = channel
        .queue_declare(
            topology.group_queue("nosuchgroup").into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await;
    assert!(queue.is_err(), "a queue was made for a typo");
    let _ = conn.close(200, "done".into()).await;

    // Declared, it works; in use, it cannot be deleted; unused, it can.
    let out = env.chime(&["group", "create", "etl"]).await?;
    assert!(out.status.success(), "{out:?}");
    let job = client
        .post(format!("{api}/api/v1/jobs"))
        .json(&json!({"name": "j", "kind": "noop", "worker_group": "etl"}));
    assert_eq!(status_of(job).await?, StatusCode::CREATED);
    let out = env.chime(&["group", "delete", "etl"]).await?;
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use"),
        "{out:?}"
    );
    let out = env.chime(&["group", "list"]).await?;
    assert!(String::from_utf8_lossy(&out.stdout).contains("etl"));
    env.cleanup().await
}

/// Input PostgreSQL cannot store, or that makes no sense, is a 4xx naming the field (never a
/// 503 with database text), and over AMQP a dead letter at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_4xx_naming_the_field_never_a_503() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let api = env.api_url().to_string();
    let client = http();
    let cases = [
        (
            "/api/v1/tasks",
            json!({"kind": "noop", "data": {"k": "a\u{0}b"}}),
            "data.k",
        ),
        (
            "/api/v1/tasks",
            json!({"kind": "noop", "execute_user": "../x"}),
            "execute_user",
        ),
        (
            "/api/v1/jobs",
            json!({"name": "j", "kind": "noop", "failed_retries": -1}),
            "failed_retries",
        ),
        (
            "/api/v1/jobs",
            json!({"name": "j", "kind": "noop", "reject_interval_ms": -5}),
            "reject_interval_ms",
        ),
        (
            "/api/v1/jobs",
            json!({"name": "j", "kind": "noop", "timeout_ms": 0}),
            "timeout_ms",
        ),
        (
            "/api/v1/jobs",
            json!({"name": "..", "kind": "noop"}),
            "job name",
        ),
        (
            "/api/v1/jobs",
            json!({"name": ".", "kind": "noop"}),
            "job name",
        ),
        (
            "/api/v1/jobs",
            json!({"name": "j", "group": "a/b", "kind": "noop"}),
            "job group",
        ),
        (
            "/api/v1/jobs",
            json!({"name": "j", "kind": "noop", "description": "x\u{0}"}),
            "description",
        ),
        (
            "/api/v1/worker-groups",
            json!({"name": ".."}),
            "worker group",
        ),
    ];
    for (path, body, field) in cases {
        let response = client
            .post(format!("{api}{path}"))
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        assert!(status.is_client_error(), "{body}: {status} {text}");
        assert!(text.contains(field), "{body}: {text} should name {field}");
    }
    for (body, field) in [
        (json!({"upstream": "a\u{0}"}), "upstream"),
        (
            json!({"upstream": "a", "upstream_group": "g\u{0}"}),
            "upstream_group",
        ),
    ] {
        let response = client
            .post(format!("{api}/api/v1/jobs/default/j/dependencies"))
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {text}");
        assert!(text.contains(field), "{body}: {text} should name {field}");
    }
    let nul_path = client.get(format!("{api}/api/v1/jobs/a%00/b"));
    assert_eq!(status_of(nul_path).await?, StatusCode::BAD_REQUEST);
    let route = client
        .put(format!("{api}/api/v1/kind-routes/a%20b"))
        .json(&json!({"worker_group": "default"}));
    assert_eq!(status_of(route).await?, StatusCode::BAD_REQUEST);
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(jobs, 0);

    // Over AMQP a NUL is dead-lettered at once, not retried to the queue's delivery limit.
    let topology = Topology::new(env.settings.prefix.clone());
    publish_submission(
        &env,
        NewTask {
            id: Some(Uuid::now_v7()),
            kind: "noop".into(),
            data: json!({"k": "a\u{0}b"}),
            ..NewTask::default()
        },
        None,
    )
    .await?;
    let reasons = wait_dead_letters(&topology, 1).await?;
    assert!(reasons[0].contains("NUL"), "{reasons:?}");
    env.cleanup().await
}

/// A size from /proc/<pid>/status (`VmHWM:`, `VmRSS:`), in bytes.
fn status_bytes(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field}"))?;
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .with_context(|| format!("no {field} value"))?
        .parse()?;
    Ok(kib * 1024)
}

fn peak_rss_bytes(pid: u32) -> Result<u64> {
    status_bytes(pid, "VmHWM:")
}

fn rss_bytes(pid: u32) -> Result<u64> {
    status_bytes(pid, "VmRSS:")
}

/// A task list is summaries: its size is bounded by its length, whatever the tasks carry, and
/// lists read at once do not grow the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_lists_are_summaries_bounded_by_their_length() -> Result<()> {
    let env = TestEnv::new().await?;
    sqlx::query(
        "INSERT INTO tasks (id, kind, spec, worker_group, status, data, result)
         SELECT gen_random_uuid(), 'noop', '{}', 'default', 'succeeded',
                jsonb_build_object('k', repeat(md5(i::text), 32768)),
                jsonb_build_object('output', 'o', 'exit_code', 0)
         FROM generate_series(1, 1000) i",
    )
    .execute(env.store.pool())
    .await?;
    let port = free_port()?;
    let addr = format!("127.0.0.1:{port}");
    let mut api = env.spawn_chime_with(&["api", "--api-addr", &addr], &[])?;
    let pid = api.id().context("the API's pid")?;
    let url = format!("http://{addr}");
    eventually("the API to be ready", || async {
        Ok(http()
            .get(format!("{url}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()))
    })
    .await?;
    let lists = (0..8).map(|_| {
        let url = url.clone();
        async move {
            let body = http()
                .get(format!("{url}/api/v1/tasks?limit=1000"))
                .send()
                .await?
                .bytes()
                .await?;
            anyhow::Ok(body)
        }
    });
    for body in futures::future::try_join_all(lists).await? {
        let tasks: Vec<serde_json::Value> = serde_json::from_slice(&body)?;
        assert_eq!(tasks.len(), 1000);
        assert!(
            body.len() < 2_000_000,
            "a list of 1,000 is {} bytes",
            body.len()
        );
        assert!(tasks[0].get("data").is_none() && tasks[0].get("spec").is_none());
    }
    let peak = peak_rss_bytes(pid)?;
    assert!(
        peak < 100 * 1024 * 1024,
        "the API peaked at {} MiB",
        peak >> 20
    );
    api.kill().await?;
    env.cleanup().await
}

/// A bootstrap secret as `openssl rand -hex 32` makes one.
const BOOTSTRAP_SECRET: &str = "5f0c3a9e2b7d41c8a6e9f03b2d7c5a1e8b4f6d2c9a7e3b1f5d8c2a6e4b9f7d3c";

/// `CHIME_API_TOKEN` is recorded (hashed) as the `bootstrap` token, so every process of the
/// installation — a worker started without it included — knows authentication is on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_token_turns_authentication_on_for_every_process() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.settings.api_token = Some(BOOTSTRAP_SECRET.into());
    env.start(Services::API).await?;
    let listed = tokens::list(&env.store).await?;
    assert!(
        listed
            .iter()
            .any(|t| t.name == "bootstrap" && t.role == Role::Admin),
        "{listed:?}"
    );
    assert!(tokens::any_live(&env.store).await?);
    let api = env.api_url().to_string();
    let client = http();
    assert_eq!(
        status_of(client.get(format!("{api}/api/v1/tasks"))).await?,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status_of(
            client
                .get(format!("{api}/api/v1/tasks"))
                .bearer_auth(BOOTSTRAP_SECRET)
        )
        .await?,
        StatusCode::OK
    );
    // A worker that was not given the token refuses an anonymous AMQP submission.
    let _worker = env.spawn_chime(&["worker"])?;
    let topology = Topology::new(env.settings.prefix.clone());
    publish_submission(
        &env,
        NewTask {
            id: Some(Uuid::now_v7()),
            kind: "noop".into(),
            ..NewTask::default()
        },
        None,
    )
    .await?;
    let reasons = wait_dead_letters(&topology, 1).await?;
    assert!(reasons[0].contains("user_id"), "{reasons:?}");
    env.cleanup().await
}

/// Revoking the bootstrap token revokes it: the running API refuses it at once, and an API
/// restarted with it refuses to start, saying why once. A guessable secret and a reserved name in
/// another case are refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_bootstrap_token_stays_revoked() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.settings.api_token = Some(BOOTSTRAP_SECRET.into());
    env.start(Services::API).await?;
    let api = env.api_url().to_string();
    let client = http();
    let create = |name: &str| {
        client
            .post(format!("{api}/api/v1/tokens"))
            .bearer_auth(BOOTSTRAP_SECRET)
            .json(&json!({"name": name, "role": "admin"}))
    };
    for reserved in ["Local", "BOOTSTRAP", "local"] {
        assert_eq!(
            status_of(create(reserved)).await?,
            StatusCode::BAD_REQUEST,
            "{reserved}"
        );
    }
    let revoked = client
        .delete(format!("{api}/api/v1/tokens/bootstrap"))
        .bearer_auth(BOOTSTRAP_SECRET)
        .send()
        .await?;
    assert!(revoked.status().is_success(), "{}", revoked.status());
    assert_eq!(status_of(create("after")).await?, StatusCode::UNAUTHORIZED);
    assert_eq!(
        status_of(
            client
                .get(format!("{api}/api/v1/tasks"))
                .bearer_auth(BOOTSTRAP_SECRET)
        )
        .await?,
        StatusCode::UNAUTHORIZED
    );
    // Without any token the API still asks for one: it was started with CHIME_API_TOKEN.
    assert_eq!(
        status_of(client.get(format!("{api}/api/v1/tasks"))).await?,
        StatusCode::UNAUTHORIZED
    );

    let addr = format!("127.0.0.1:{}", free_port()?);
    let restarted = env
        .chime(&["api", "--api-addr", &addr, "--token", BOOTSTRAP_SECRET])
        .await?;
    assert!(!restarted.status.success());
    let stderr = String::from_utf8_lossy(&restarted.stderr);
    assert_eq!(stderr.matches("revoked").count(), 1, "{stderr}");
    assert!(stderr.contains("openssl rand -hex 32"), "{stderr}");

    for weak in [
        "a",
        "correct-horse-battery-staple",
        &"ab".repeat(40),
        &"0123456789abcdef".repeat(2),
    ] {
        let out = env
            .chime(&["api", "--api-addr", &addr, "--token", weak])
            .await?;
        assert!(!out.status.success(), "{weak}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("too weak"), "{weak}: {stderr}");
    }
    env.cleanup().await
}

/// Running a job by hand, backfilling it (with its downstream) and re-running a task are
/// submissions of its command as its user: an operate token may do them only for the execute
/// users it has, as for `POST /api/v1/tasks`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_backfill_and_rerun_need_the_jobs_execute_user() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let api = env.api_url().to_string();
    let client = http();
    let admin = token(&env, "ops", Role::Admin, &["daemon"]).await?;
    let operator = token(&env, "ci", Role::Operate, &[]).await?;
    let daemon_operator = token(&env, "etl", Role::Operate, &["daemon"]).await?;
    let job = |name: &str, user: Option<&str>| {
        let mut body = json!({"name": name, "kind": "noop"});
        if let Some(user) = user {
            body["execute_user"] = json!(user);
        }
        client
            .post(format!("{api}/api/v1/jobs"))
            .bearer_auth(&admin)
            .json(&body)
    };
    assert_eq!(
        status_of(job("as_daemon", Some("daemon"))).await?,
        StatusCode::CREATED
    );
    assert_eq!(status_of(job("plain", None)).await?, StatusCode::CREATED);
    assert_eq!(
        status_of(job("below", Some("daemon"))).await?,
        StatusCode::CREATED
    );
    let depend = client
        .post(format!("{api}/api/v1/jobs/default/below/dependencies"))
        .bearer_auth(&admin)
        .json(&json!({"upstream": "plain"}));
    assert!(status_of(depend).await?.is_success());

    let run = |secret: &str, name: &str| {
        client
            .post(format!("{api}/api/v1/jobs/default/{name}/run"))
            .bearer_auth(secret)
            .json(&json!({"data": {"mine": true}}))
    };
    let refused = run(&operator, "as_daemon").send().await?;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let text = refused.text().await?;
    assert!(text.contains("daemon"), "{text}");
    // "below" has no trigger: plain's success runs it, as daemon, so running plain needs daemon.
    let refused = run(&operator, "plain").send().await?;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let text = refused.text().await?;
    assert!(text.contains("below"), "{text}");
    let cron = json!({"kind": "cron", "cron": "0 0 0 1 1 ? 2099", "time_zone": "UTC"});
    let trigger = client
        .post(format!("{api}/api/v1/triggers"))
        .bearer_auth(&admin)
        .json(&json!({"name": "yearly", "job": "below", "schedule": cron}));
    assert_eq!(status_of(trigger).await?, StatusCode::CREATED);
    // Scheduling and resuming a job are running it too.
    let scheduled = client
        .post(format!("{api}/api/v1/triggers"))
        .bearer_auth(&operator)
        .json(&json!({"name": "mine", "job": "as_daemon", "schedule": cron}));
    assert_eq!(status_of(scheduled).await?, StatusCode::FORBIDDEN);
    let resume = client
        .post(format!("{api}/api/v1/jobs/default/below/resume"))
        .bearer_auth(&operator);
    assert_eq!(status_of(resume).await?, StatusCode::FORBIDDEN);
    let resume_group = client
        .post(format!("{api}/api/v1/trigger-groups/default/resume"))
        .bearer_auth(&operator);
    assert_eq!(status_of(resume_group).await?, StatusCode::FORBIDDEN);
    assert_eq!(
        status_of(run(&operator, "plain")).await?,
        StatusCode::CREATED
    );
    assert_eq!(
        status_of(run(&daemon_operator, "as_daemon")).await?,
        StatusCode::CREATED
    );

    let backfill = |secret: &str, name: &str, with_downstream: bool| {
        client
            .post(format!("{api}/api/v1/jobs/default/{name}/backfill"))
            .bearer_auth(secret)
            .json(&json!({
                "from": "2026-01-01T00:00:00Z",
                "to": "2026-01-02T00:00:00Z",
                "with_downstream": with_downstream
            }))
    };
    assert_eq!(
        status_of(backfill(&operator, "as_daemon", false)).await?,
        StatusCode::FORBIDDEN
    );
    // The upstream alone is the operator's to backfill; with its downstream it is not.
    assert_eq!(
        status_of(backfill(&operator, "plain", true)).await?,
        StatusCode::FORBIDDEN
    );
    assert_ne!(
        status_of(backfill(&operator, "plain", false)).await?,
        StatusCode::FORBIDDEN
    );

    let submitted = client
        .post(format!("{api}/api/v1/tasks"))
        .bearer_auth(&admin)
        .json(&json!({"kind": "noop", "execute_user": "daemon"}))
        .send()
        .await?;
    assert_eq!(submitted.status(), StatusCode::CREATED);
    let id: Uuid = submitted.json::<serde_json::Value>().await?["id"]
        .as_str()
        .context("an id")?
        .parse()?;
    let ended = env.wait_terminal(id).await?;
    let rerun = |secret: &str| {
        client
            .post(format!("{api}/api/v1/tasks/{id}/rerun"))
            .bearer_auth(secret)
    };
    assert_eq!(status_of(rerun(&operator)).await?, StatusCode::FORBIDDEN);
    assert_eq!(
        env.task(id).await?.attempt,
        ended.attempt,
        "a refused rerun changed nothing"
    );
    assert_eq!(status_of(rerun(&daemon_operator)).await?, StatusCode::OK);
    // A task keeps the user it was made with: once the job no longer names daemon, re-running
    // its old runs in bulk still needs daemon, and a refusal changes nothing.
    let old_runs: Vec<Uuid> = sqlx::query_scalar(
        "SELECT t.id FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.name = 'as_daemon'",
    )
    .fetch_all(env.store.pool())
    .await?;
    for id in &old_runs {
        env.wait_terminal(*id).await?;
    }
    let unnamed = client
        .patch(format!("{api}/api/v1/jobs/default/as_daemon"))
        .bearer_auth(&admin)
        .json(&json!({"execute_user": null}));
    assert_eq!(status_of(unnamed).await?, StatusCode::OK);
    let bulk = client
        .post(format!("{api}/api/v1/jobs/default/as_daemon/tasks/rerun"))
        .bearer_auth(&operator)
        .json(&json!({}));
    assert_eq!(status_of(bulk).await?, StatusCode::FORBIDDEN);
    for id in &old_runs {
        assert_eq!(
            env.task(*id).await?.attempt,
            1,
            "a refused bulk rerun changed nothing"
        );
    }
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE submit_user = 'ci'")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(
        runs, 1,
        "only the plain job ran for the operator without execute users"
    );
    env.cleanup().await
}

/// Sockets that never send a request cost the API almost nothing and do not stay open: 1,000 of
/// them from one address, before any authentication, grow it by less than 50 MB, it still
/// answers other addresses, and it closes each one that sent no request head within its
/// deadline (those past the address's share at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cost_little_and_are_closed() -> Result<()> {
    use tokio::io::AsyncReadExt;
    let env = TestEnv::new().await?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let mut api = env.spawn_chime_with(&["api", "--api-addr", &addr], &[])?;
    let pid = api.id().context("the API's pid")?;
    let url = format!("http://{addr}");
    eventually("the API to be ready", || async {
        Ok(http()
            .get(format!("{url}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()))
    })
    .await?;
    // Served once, so what the first request allocates is not counted as the sockets' cost.
    http()
        .get(format!("{url}/api/v1/openapi.json"))
        .send()
        .await?;
    let before = rss_bytes(pid)?;
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(tokio::net::TcpStream::connect(&addr).await?);
    }
    // Every socket accepted or, past one address's share, closed; the API still answers
    // another address. Then the cost is read.
    let openapi = http_from("127.0.0.2")?
        .get(format!("{url}/api/v1/openapi.json"))
        .send()
        .await?;
    assert!(openapi.status().is_success());
    let grown = rss_bytes(pid)?.saturating_sub(before);
    assert!(
        grown < 50 * 1024 * 1024,
        "1,000 idle connections grew the API by {} MiB",
        grown >> 20
    );
    // Each is closed by the API once its deadline for a request head passes.
    let closed = std::sync::atomic::AtomicUsize::new(0);
    let deadline = std::time::Duration::from_secs(90);
    futures::future::try_join_all(idle.iter_mut().map(|socket| {
        let closed = &closed;
        async move {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(deadline, socket.read(&mut byte)).await;
            if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
                closed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            anyhow::Ok(())
        }
    }))
    .await?;
    assert_eq!(
        closed.into_inner(),
        1000,
        "every idle socket was closed, at once past its address's share"
    );
    drop(idle);
    let after = rss_bytes(pid)?.saturating_sub(before);
    assert!(after < 50 * 1024 * 1024, "still {} MiB more", after >> 20);
    api.kill().await?;
    env.cleanup().await
}

/// A root worker runs tasks as another user only where that user cannot walk into the store or
/// the broker: on this machine's servers (PostgreSQL trusting loopback, RabbitMQ's `guest`) it
/// refuses to start, naming the holes and the fix, unless `worker.allow_open_store`; on an
/// install with passwords it starts, and a task running as the default user gets into neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_reach_no_store_or_broker_without_credentials() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: only a root worker runs tasks as another user");
        return Ok(());
    }
    // The machine's servers, where they are open to anyone on loopback (as on the machines
    // this suite runs on; a locked-down machine has nothing to refuse).
    let env = TestEnv::new().await?;
    let probes = chime_worker::open_store::Probes {
        database_url: env.settings.database_url.clone(),
        amqp_url: env.settings.amqp_url.clone(),
        task_users: vec!["nobody".into()],
    };
    let holes = chime_worker::open_store::find_holes(&probes).await;
    if holes.is_empty() {
        eprintln!("the shared servers need credentials: no refusal to check here");
    } else {
        let refusal = chime_worker::open_store::refusal(&holes, "nobody");
        assert!(
            refusal.contains("CHIME_WORKER__ALLOW_OPEN_STORE"),
            "{refusal}"
        );
        let mut settings = env.settings.clone();
        settings.worker.allow_open_store = false;
        let refused = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            chime_cli::commands::services::run_until(
                settings,
                Services::WORKER,
                tokio_util::sync::CancellationToken::new(),
            ),
        )
        .await
        .context("the worker should have refused to start")?;
        let error = format!("{:#}", refused.expect_err("the worker refused"));
        assert!(error.contains("refusing to run tasks"), "{error}");
        let workers: i64 = sqlx::query_scalar("SELECT count(*) FROM workers")
            .fetch_one(env.store.pool())
            .await?;
        assert_eq!(workers, 0, "no worker registered: {error}");
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), env.chime(&["worker"]))
            .await
            .context("chime worker should have refused to start")??;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("refusing to run tasks as \"nobody\""),
            "{stderr}"
        );
    }
    env.cleanup().await?;

    // An install with passwords: its own PostgreSQL (scram for every connection) and RabbitMQ
    // (one user, no guest).
    let pg = chime_tests::postgres::PrivatePostgres::start_with_password("pg-secret-for-the-test")
        .await?;
    let broker =
        chime_tests::rabbitmq::PrivateRabbitMq::start("chime", "mq-secret-for-the-test").await?;
    let result = async {
        let mut env = TestEnv::with_amqp_url(&pg.url(), &broker.url()).await?;
        env.settings.worker.allow_open_store = false;
        let probes = chime_worker::open_store::Probes {
            database_url: env.settings.database_url.clone(),
            amqp_url: env.settings.amqp_url.clone(),
            task_users: vec!["nobody".into()],
        };
        let holes = chime_worker::open_store::find_holes(&probes).await;
        assert!(holes.is_empty(), "{holes:?}");
        env.start(Services::ALL).await?;
        let guest = format!("amqp://guest:guest@127.0.0.1:{}/%2f", broker.port());
        assert!(
            lapin::Connection::connect(&guest, lapin::ConnectionProperties::default())
                .await
                .is_err(),
            "guest got into the locked-down broker"
        );
        // A task as the default user tries PostgreSQL as every role that matters.
        let script = format!(
            "command -v psql >/dev/null || echo 'no psql here'; \
             for role in postgres nobody chime root; do \
               psql -w -h 127.0.0.1 -p {port} -U $role -d postgres -c 'select 1' >/dev/null 2>&1 \
                 && echo \"in as $role\"; \
             done; echo done",
            port = pg.port()
        );
        let id = env
            .submit(&["--kind", "shell", "--script", &script])
            .await?;
        let task = env.wait_terminal(id).await?;
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        let output = task.result.map(|r| r.output).unwrap_or_default();
        assert_eq!(output, "done\n", "a task got into the store: {output}");
        env.cleanup().await
    }
    .await;
    pg.destroy().await;
    broker.destroy().await;
    result
}

/// Every change the API makes is audited with its object and what it set: a new admin token's
/// name and role (never its secret), a webhook's URL without its password or query values, a
/// worker group, a prune's cut and what it removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_and_prunes_are_audited_with_their_object_and_values() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    env.chime_ok(&[
        "webhook",
        "add",
        "https://bot:hunter2@hooks.example.com/T1?token=xoxb-secret&channel=ops",
    ])
    .await?;
    env.chime_ok(&["group", "create", "etl", "--description", "nightly loads"])
        .await?;
    env.chime_ok(&["prune", "--older-than", "30d"]).await?;
    // Last: the first token turns authentication on, and the trail is read with it.
    let secret = env
        .chime_ok(&["token", "create", "nightly-bot", "--role", "admin"])
        .await?;
    let out = env.chime(&["--token", &secret, "audit", "--json"]).await?;
    anyhow::ensure!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout)?;
    assert!(
        !text.contains(&secret) && !text.contains("hunter2") && !text.contains("xoxb-secret"),
        "no secret in the trail: {text}"
    );
    let events: Vec<serde_json::Value> = serde_json::from_str(&text)?;
    let event = |object: &str| {
        events
            .iter()
            .find(|e| e["object"] == object)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no event for {object}: {text}"))
    };
    let set = |event: &serde_json::Value, field: &str| {
        event["changes"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["field"] == field))
            .map(|c| c["after"].clone())
            .unwrap_or_default()
    };
    let token = event("token nightly-bot")?;
    assert_eq!(set(&token, "name"), "nightly-bot", "{token}");
    assert_eq!(set(&token, "role"), "admin", "{token}");
    let hook = events
        .iter()
        .find(|e| {
            e["object"]
                .as_str()
                .is_some_and(|o| o.starts_with("webhook "))
        })
        .ok_or_else(|| anyhow::anyhow!("no webhook event: {text}"))?;
    assert_eq!(
        set(hook, "url"),
        "https://bot:redacted@hooks.example.com/T1?token=redacted&channel=redacted",
        "{hook}"
    );
    let group = event("worker-group etl")?;
    assert_eq!(set(&group, "description"), "nightly loads", "{group}");
    let prune = event("history tasks")?;
    assert_eq!(set(&prune, "older_than_s"), 30 * 86_400, "{prune}");
    assert_eq!(set(&prune, "tasks_removed"), 0, "{prune}");
    env.cleanup().await
}

/// A client whose requests leave from `source` (any 127.x address is this machine).
fn http_from(source: &str) -> Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder()
        .local_address(Some(source.parse()?))
        .pool_max_idle_per_host(0)
        .build()?)
}

/// A connection to `addr` from `source`.
async fn connect_from(source: &str, addr: &str) -> Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{source}:0").parse()?)?;
    Ok(socket.connect(addr.parse()?).await?)
}

/// The status of the response `socket` reads first (0: closed before one came).
async fn status_read(socket: &mut tokio::net::TcpStream) -> Result<u16> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        if socket.read(&mut byte).await? == 0 {
            return Ok(0);
        }
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head);
    Ok(line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0))
}

/// Streams and slow bodies cannot take the API from everyone else: of 1,100 event streams
/// asked for by one token, it serves its share and refuses the rest at once; bodies trickled on
/// 300 connections of one address take only that address's share, and are answered 408 when
/// their deadline passes. Through both, `/healthz` answers within 2 s, from that address too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_trickled_bodies_leave_health_and_others_answered() -> Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let url = env.api_url();
    let addr = url.trim_start_matches("http://").to_string();
    let healthz = |source: &'static str| {
        let url = url.to_string();
        async move {
            let answered = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                http_from(source)?.get(format!("{url}/healthz")).send(),
            )
            .await
            .with_context(|| format!("/healthz from {source} did not answer within 2 s"))??;
            anyhow::ensure!(answered.status().is_success(), "{answered:?}");
            anyhow::Ok(())
        }
    };

    let mut streams = Vec::new();
    let mut served = 0;
    let mut refused = 0;
    for _ in 0..1100 {
        let mut socket = connect_from("127.0.0.1", &addr).await?;
        socket
            .write_all(format!("GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let status =
            tokio::time::timeout(std::time::Duration::from_secs(10), status_read(&mut socket))
                .await
                .context("a stream was neither served nor refused within 10 s")??;
        match status {
            200 => served += 1,
            429 => refused += 1,
            other => anyhow::bail!("a stream was answered {other}"),
        }
        streams.push(socket);
    }
    assert_eq!(
        served,
        chime_api::limits::MAX_STREAMS_PER_TOKEN,
        "one token's share"
    );
    assert_eq!(refused, 1100 - served);
    healthz("127.0.0.1").await?;

    let mut trickles = Vec::new();
    for _ in 0..300 {
        let mut socket = connect_from("127.0.0.3", &addr).await?;
        let _ = socket
            .write_all(
                format!(
                    "POST /api/v1/jobs HTTP/1.1\r\nHost: {addr}\r\ncontent-type: \
                     application/json\r\ncontent-length: 100000\r\n\r\n{{"
                )
                .as_bytes(),
            )
            .await;
        trickles.push(socket);
    }
    healthz("127.0.0.3").await?;
    healthz("127.0.0.1").await?;
    let jobs = http_from("127.0.0.4")?
        .get(format!("{url}/api/v1/jobs"))
        .send()
        .await?;
    assert!(jobs.status().is_success(), "{jobs:?}");
    // The first trickled body is answered 408 once its deadline passes.
    let late = tokio::time::timeout(
        chime_api::limits::BODY_READ_TIMEOUT + std::time::Duration::from_secs(15),
        status_read(&mut trickles[0]),
    )
    .await
    .context("the trickled body was never answered")??;
    assert_eq!(late, 408);
    drop(streams);
    drop(trickles);
    env.cleanup().await
}

/// Batches in flight hold a bounded amount: sixteen 15 MB batches at once (each costs several
/// times its size while it is parsed and recorded; at once they took the API to 1.1 GB) keep the
/// API's peak under 600 MB: a batch waits for room, or is answered 503 with Retry-After and sent
/// again; every task of every batch is recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_in_flight_hold_a_bounded_amount() -> Result<()> {
    let env = TestEnv::new().await?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let mut api = env.spawn_chime_with(&["api", "--api-addr", &addr], &[])?;
    let pid = api.id().context("the API's pid")?;
    let url = format!("http://{addr}");
    eventually("the API to be ready", || async {
        Ok(http()
            .get(format!("{url}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()))
    })
    .await?;
    // 1,000 submissions of about 15 KB each: a 15 MB body.
    let batch = |n: usize| {
        let tasks: Vec<serde_json::Value> = (0..1000)
            .map(|i| {
                json!({"kind": "noop", "id": Uuid::now_v7(),
                       "data": {"batch": n, "i": i, "pad": "x".repeat(15_000)}})
            })
            .collect();
        serde_json::to_vec(&json!({ "tasks": tasks }))
    };
    let bodies: Vec<Vec<u8>> = (0..16).map(batch).collect::<Result<_, _>>()?;
    assert!(bodies[0].len() > 15_000_000, "{}", bodies[0].len());
    let busy = std::sync::atomic::AtomicUsize::new(0);
    futures::future::try_join_all(bodies.into_iter().map(|body| {
        let (url, busy) = (&url, &busy);
        async move {
            let client = http();
            loop {
                let answer = client
                    .post(format!("{url}/api/v1/tasks/batch"))
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await?;
                if answer.status() == StatusCode::SERVICE_UNAVAILABLE {
                    anyhow::ensure!(
                        answer.headers().contains_key("retry-after"),
                        "503 without Retry-After"
                    );
                    busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    continue;
                }
                anyhow::ensure!(answer.status().is_success(), "{answer:?}");
                return anyhow::Ok(());
            }
        }
    }))
    .await?;
    let peak = peak_rss_bytes(pid)?;
    let tasks: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(tasks, 16_000, "every task of every batch recorded once");
    // A batch waits for room first (up to 30 s), so a 503 is rare; each is counted.
    eprintln!(
        "batches answered 503: {}; the API's peak: {} MiB, now {} MiB",
        busy.into_inner(),
        peak >> 20,
        rss_bytes(pid)? >> 20
    );
    assert!(
        peak < 600 * 1024 * 1024,
        "sixteen 15 MB batches took the API to {} MiB",
        peak >> 20
    );
    api.kill().await?;
    env.cleanup().await
}

/// A worker that is not root runs its tasks as its own user, who can then walk into whatever it
/// can without credentials: on this machine's servers (PostgreSQL trusting loopback, RabbitMQ's
/// `guest`) it refuses to start as a root worker does, naming itself, unless
/// `worker.allow_open_store`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_is_not_root_refuses_an_open_store_too() -> Result<()> {
    let Some(nobody) = nix::unistd::User::from_name("nobody")? else {
        eprintln!("skipped: no user nobody to run the worker as");
        return Ok(());
    };
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: starting a worker as another user needs root");
        return Ok(());
    }
    let env = TestEnv::new().await?;
    let probes = chime_worker::open_store::Probes {
        database_url: env.settings.database_url.clone(),
        amqp_url: env.settings.amqp_url.clone(),
        task_users: vec!["nobody".into()],
    };
    if chime_worker::open_store::find_holes(&probes)
        .await
        .is_empty()
    {
        eprintln!("the shared servers need credentials: no refusal to check here");
        return env.cleanup().await;
    }
    let mut worker = env.chime_command(&["worker"])?;
    worker
        .env("CHIME_WORKER__ALLOW_OPEN_STORE", "false")
        .uid(nobody.uid.as_raw())
        .gid(nobody.gid.as_raw())
        .current_dir("/")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), worker.output())
        .await
        .context("the worker should have refused to start")??;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("refusing to run tasks as \"nobody\""),
        "{stderr}"
    );
    let workers: i64 = sqlx::query_scalar("SELECT count(*) FROM workers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(workers, 0, "no worker registered");
    env.cleanup().await
}
