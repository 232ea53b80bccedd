//! The ad-hoc path: `chime submit` → API → task + outbox → RabbitMQ → worker → outcome.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::bus::Topology;
use chime_core::bus::publish_confirmed;
use chime_core::model::{NewTask, TaskMessage, TaskStatus, message::SubmitMessage};
use chime_core::store::task_lifecycle;
use chime_tests::{TestEnv, eventually, last_line};
use lapin::options::{BasicGetOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable};
use uuid::Uuid;

const UP: Services = Services::ALL;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitted_shell_task_succeeds_with_its_output() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let out = env
        .chime(&[
            "submit",
            "--kind",
            "shell",
            "--worker-group",
            "default",
            "--",
            "echo",
            "hi",
        ])
        .await?;
    assert!(out.status.success(), "{out:?}");
    let id: Uuid = last_line(&out).parse()?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    let result = task.result.expect("a result");
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.output, "hi\n");

    // `chime task show --json` prints the task's fields.
    let show = env
        .chime(&["task", "show", &id.to_string(), "--json"])
        .await?;
    assert!(show.status.success(), "{show:?}");
    let json: serde_json::Value = serde_json::from_slice(&show.stdout)?;
    for field in [
        "id",
        "status",
        "attempt",
        "job",
        "data_time",
        "attempts",
        "result",
    ] {
        assert!(json.get(field).is_some(), "missing {field} in {json}");
    }
    assert_eq!(json["status"], "succeeded");
    let attempt = &json["attempts"][0];
    for field in ["outcome", "worker", "started_at", "finished_at", "error"] {
        assert!(
            attempt.get(field).is_some(),
            "missing attempts[].{field} in {json}"
        );
    }
    assert_eq!(attempt["outcome"], "succeeded");

    let list = env
        .chime(&["task", "list", "--status", "succeeded", "--json"])
        .await?;
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&list.stdout)?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], id.to_string());
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_command_is_failed_with_exit_code_and_output() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let out = env
        .chime(&[
            "submit",
            "--kind",
            "shell",
            "--script",
            "echo on-stdout; echo on-stderr >&2; exit 3",
        ])
        .await?;
    assert!(out.status.success(), "{out:?}");
    let id: Uuid = last_line(&out).parse()?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.reason.as_deref(), Some("failed"));
    let result = task.result.expect("a result");
    assert_eq!(result.exit_code, Some(3));
    assert!(result.output.contains("on-stdout\n"), "{result:?}");
    assert!(result.output.contains("on-stderr\n"), "{result:?}");
    assert_eq!(task.attempts.len(), 1);
    assert_eq!(task.attempts[0].exit_code, Some(3));
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_fails_the_task() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let out = env
        .chime(&[
            "submit",
            "--kind",
            "shell",
            "--timeout-ms",
            "300",
            "--",
            "sleep",
            "30",
        ])
        .await?;
    let id: Uuid = last_line(&out).parse()?;
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.reason.as_deref(), Some("timeout"));
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_task_message_delivered_twice_runs_once() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let marker = std::env::temp_dir().join(format!("chime-twice-{}", Uuid::now_v7()));
    let script = format!("echo ran >> {}", marker.display());
    // No worker yet: the relay publishes the task's message once...
    env.start(Services::API).await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let submitted = task_lifecycle::submit(
        &env.store,
        &topology,
        NewTask {
            kind: "shell".into(),
            spec: serde_json::json!({ "command": script }),
            ..NewTask::default()
        },
    )
    .await?;
    let queue = topology.group_queue("default");
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    eventually("the relay to publish", || async {
        Ok(chime_core::store::outbox::unsent_count(&env.store).await? == 0)
    })
    .await?;
    // ...and we deliver the same message again.
    let message = TaskMessage {
        v: 1,
        task_id: submitted.id,
        attempt: 1,
        kind: "shell".into(),
        group: "default".into(),
        spec: serde_json::json!({ "command": script }),
        data: serde_json::json!({}),
        data_time: None,
        timeout_ms: None,
        execute_user: None,
    };
    // Several copies, so that some reach the worker together and are asked about in one batch.
    for _ in 0..3 {
        publish_confirmed(
            &channel,
            &topology.tasks_exchange(),
            "default",
            &serde_json::to_vec(&message)?,
            FieldTable::default(),
        )
        .await?;
    }
    env.start(Services::WORKER).await?;
    let task = env.wait_terminal(submitted.id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    // Both deliveries are consumed and acked...
    eventually("both deliveries to be acked", || async {
        let q = channel
            .queue_declare(
                queue.clone().into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await?;
        Ok(q.message_count() == 0)
    })
    .await?;
    // ...yet the command ran once, in one attempt.
    let task = env.task(submitted.id).await?;
    assert_eq!(task.attempts.len(), 1);
    assert_eq!(std::fs::read_to_string(&marker)?, "ran\n");
    let _ = std::fs::remove_file(&marker);
    env.cleanup().await
}

/// A confirming channel on which the installation's exchanges and the `default` group's queues
/// are declared, for tests that publish task messages themselves.
async fn default_group_channel(
    env: &TestEnv,
    topology: &Topology,
) -> Result<(lapin::Connection, lapin::Channel)> {
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    topology.declare(&channel).await?;
    topology.declare_group(&channel, "default").await?;
    Ok((conn, channel))
}

/// The database is the truth of what runs: a task message forged for a ready task (its id and
/// attempt, another command) does not run and spends no attempt; the command the task's row
/// records does, once, as attempt 1, and the forged message is dead-lettered with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_task_message_runs_the_recorded_command_not_its_own() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let marker = std::env::temp_dir().join(format!("chime-forged-{}", Uuid::now_v7()));
    let topology = Topology::new(env.settings.prefix.clone());
    let submitted = task_lifecycle::submit(
        &env.store,
        &topology,
        NewTask {
            kind: "shell".into(),
            spec: serde_json::json!({ "command": format!("echo recorded >> {}", marker.display()) }),
            ..NewTask::default()
        },
    )
    .await?;
    // The forged message is in the queue before the genuine one (no relay runs yet).
    let (conn, channel) = default_group_channel(&env, &topology).await?;
    let forged = TaskMessage {
        v: 1,
        task_id: submitted.id,
        attempt: 1,
        kind: "shell".into(),
        group: "default".into(),
        spec: serde_json::json!({ "command": format!("echo forged >> {}", marker.display()) }),
        data: serde_json::json!({}),
        data_time: None,
        timeout_ms: None,
        execute_user: None,
    };
    publish_confirmed(
        &channel,
        &topology.tasks_exchange(),
        "default",
        &serde_json::to_vec(&forged)?,
        FieldTable::default(),
    )
    .await?;
    env.start(Services::WORKER).await?;
    let task = env.wait_status(submitted.id, TaskStatus::Succeeded).await?;
    assert_eq!(std::fs::read_to_string(&marker)?, "recorded\n");
    assert_eq!(task.attempt, 1, "the forgery spent no attempt");
    // Taken first, the forgery is dead-lettered; taken while the genuine attempt ran, it is
    // dropped as its duplicate. Either way it never ran.
    let reasons = chime_tests::dead_letter_reasons(&topology).await?;
    assert!(reasons.iter().all(|r| r.contains("(spec)")), "{reasons:?}");
    let _ = std::fs::remove_file(&marker);
    let _ = conn.close(200, "done".into()).await;
    env.cleanup().await
}

/// A noop task without a sleep has nothing to run: its worker records it succeeded in one
/// statement, checked as a start is. A forged message for it (another `data`) completes nothing
/// (dead-lettered, or dropped as a duplicate); the genuine one succeeds as attempt 1, with its
/// one attempt row naming the worker, and a copy of it published again makes no second attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noop_task_completes_in_one_step_and_a_forgery_of_it_completes_nothing() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let submitted = task_lifecycle::submit(
        &env.store,
        &topology,
        NewTask {
            kind: "noop".into(),
            data: serde_json::json!({ "genuine": true }),
            ..NewTask::default()
        },
    )
    .await?;
    let (conn, channel) = default_group_channel(&env, &topology).await?;
    let genuine = TaskMessage {
        v: 1,
        task_id: submitted.id,
        attempt: 1,
        kind: "noop".into(),
        group: "default".into(),
        spec: serde_json::json!({}),
        data: serde_json::json!({ "genuine": true }),
        data_time: None,
        timeout_ms: None,
        execute_user: None,
    };
    let forged = TaskMessage {
        data: serde_json::json!({ "genuine": false }),
        ..genuine.clone()
    };
    // The forgery is in the inline queue before the genuine message (no relay runs yet).
    let inline_key = topology.task_routing_key("default", &serde_json::to_string(&forged)?);
    publish_confirmed(
        &channel,
        &topology.tasks_exchange(),
        &inline_key,
        &serde_json::to_vec(&forged)?,
        FieldTable::default(),
    )
    .await?;
    env.start(Services::WORKER).await?;
    let task = env.wait_status(submitted.id, TaskStatus::Succeeded).await?;
    assert_eq!(task.attempt, 1, "the forgery spent no attempt");
    // Taken first, the forgery is dead-lettered; taken while the genuine attempt was held, it is
    // dropped as its duplicate. Either way it completed nothing.
    let reasons = chime_tests::dead_letter_reasons(&topology).await?;
    assert!(reasons.iter().all(|r| r.contains("(data)")), "{reasons:?}");
    // A copy of the genuine message, as a redelivery would bring, moves nothing.
    publish_confirmed(
        &channel,
        &topology.tasks_exchange(),
        &inline_key,
        &serde_json::to_vec(&genuine)?,
        FieldTable::default(),
    )
    .await?;
    let inline_queue = topology.inline_queue("default");
    eventually("the copy to be taken from the queue", || async {
        Ok(chime_tests::queue_depth(&channel, &inline_queue).await? == 0)
    })
    .await?;
    let attempts: Vec<(i32, Option<String>, Option<String>, bool)> = sqlx::query_as(
        "SELECT attempt, outcome, worker_name, started_at <= finished_at
         FROM task_attempts WHERE task_id = $1",
    )
    .bind(submitted.id)
    .fetch_all(env.store.pool())
    .await?;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let (attempt, outcome, worker_name, ordered) = &attempts[0];
    assert_eq!((*attempt, outcome.as_deref()), (1, Some("succeeded")));
    assert!(worker_name.is_some() && *ordered, "{attempts:?}");
    assert_eq!(
        env.task(submitted.id).await?.status,
        TaskStatus::Succeeded,
        "still succeeded after the copy"
    );
    let _ = conn.close(200, "done".into()).await;
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_is_dead_lettered_and_the_worker_carries_on() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    // The worker declares its group's queue as it starts: publish once it is bound.
    eventually("the poison message to reach the group's queue", || async {
        Ok(publish_confirmed(
            &channel,
            &topology.tasks_exchange(),
            "default",
            b"this is not json",
            FieldTable::default(),
        )
        .await
        .is_ok())
    })
    .await?;
    // The worker still runs tasks.
    let out = env.chime(&["submit", "--kind", "noop"]).await?;
    let id: Uuid = last_line(&out).parse()?;
    assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Succeeded);
    // The poison message sits in <prefix>.dead with the reason.
    let dead = topology.dead_exchange();
    let got = std::sync::Mutex::new(None);
    eventually("the poison message in the dead-letter queue", || async {
        let message = channel
            .basic_get(dead.clone().into(), BasicGetOptions { no_ack: true })
            .await?;
        let found = message.is_some();
        if let Ok(mut got) = got.lock() {
            *got = message;
        }
        Ok(found)
    })
    .await?;
    let got = got.into_inner().ok().flatten();
    let message = got.expect("a dead letter");
    assert_eq!(message.delivery.data, b"this is not json");
    let headers = message
        .delivery
        .properties
        .headers()
        .clone()
        .unwrap_or_default();
    let reason = match headers.inner().get("x-chime-reason") {
        Some(AMQPValue::LongString(s)) => s.to_string(),
        other => panic!("no reason header: {other:?}"),
    };
    assert!(reason.contains("malformed message"), "{reason}");
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_published_by_any_amqp_client_runs() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let id = Uuid::now_v7();
    let submission = SubmitMessage(NewTask {
        id: Some(id),
        kind: "shell".into(),
        spec: serde_json::json!({"command": ["echo", "from amqp"]}),
        ..NewTask::default()
    });
    let body = submission.encode();
    // Published twice (a client retrying): one task.
    for _ in 0..2 {
        publish_confirmed(
            &channel,
            &topology.submit_exchange(),
            &topology.submit_exchange(),
            &body,
            FieldTable::default(),
        )
        .await?;
    }
    let task = env.wait_terminal(id).await?;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.result.expect("result").output, "from amqp\n");
    let all = chime_core::store::tasks::list(&env.store, &Default::default(), 10).await?;
    assert_eq!(all.len(), 1);
    env.cleanup().await
}

/// A worker runs only the tasks of the groups it consumes: a message copying a task row of
/// another group, published to this worker's queue (with the row's group, or claiming this one),
/// is dead-lettered and the task's row is not touched, however many times it is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_of_another_group_forged_into_this_queue_never_runs_nor_spends_attempts()
-> Result<()> {
    let mut env = TestEnv::new().await?;
    let topology = Topology::new(env.settings.prefix.clone());
    chime_core::store::worker_groups::create(
        &env.store,
        &chime_core::store::worker_groups::NewWorkerGroup {
            name: "etl".into(),
            description: String::new(),
        },
    )
    .await?;
    let marker = std::env::temp_dir().join(format!("chime-group-{}", Uuid::now_v7()));
    let submitted = task_lifecycle::submit(
        &env.store,
        &topology,
        NewTask {
            kind: "shell".into(),
            group: Some("etl".into()),
            spec: serde_json::json!({ "command": format!("echo ran >> {}", marker.display()) }),
            ..NewTask::default()
        },
    )
    .await?;
    let (_, copy) = task_lifecycle::recorded_attempt(&env.store, submitted.id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the task's row"))?;
    // A worker of the default group only.
    env.start(Services::WORKER).await?;
    let (conn, channel) = default_group_channel(&env, &topology).await?;
    let claiming_default = TaskMessage {
        group: "default".into(),
        ..copy.clone()
    };
    for message in [&copy, &claiming_default, &copy, &claiming_default] {
        // A quorum queue declared a moment ago may refuse a publish while its leader settles
        // (seen under CI's load): a publisher sends again, as any AMQP client would.
        let mut tries = 0;
        loop {
            match publish_confirmed(
                &channel,
                &topology.tasks_exchange(),
                "default",
                &serde_json::to_vec(message)?,
                FieldTable::default(),
            )
            .await
            {
                Ok(()) => break,
                Err(error) if tries < 10 => {
                    tries += 1;
                    eprintln!("publish refused ({error}); sending again");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    // Two copies of one forgery in flight at once are one: the second is dropped as a duplicate.
    let reasons = chime_tests::wait_dead_letters(&topology, 3).await?;
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("\"etl\" came from queue")),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r.contains("(group)")), "{reasons:?}");
    let task = env.task(submitted.id).await?;
    assert_eq!(task.status, TaskStatus::Ready);
    assert_eq!(task.attempt, 1);
    assert!(task.attempts.is_empty(), "{:?}", task.attempts);
    assert!(!marker.exists(), "the etl task ran on a default worker");
    let _ = conn.close(200, "done".into()).await;
    env.cleanup().await
}

/// What an operator types: `submit --wait` prints the task's output and exits with its exit
/// code; a task is named by the start of its id (8 characters), and an ambiguous start is
/// refused naming the tasks; `--cwd` sets where the command runs; a command that cannot start
/// says as whom and where; a worker is drained by its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_takes_short_ids_and_waits_with_the_tasks_exit_code() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(UP).await?;
    let out = env
        .chime(&[
            "submit",
            "--kind",
            "shell",
            "--wait",
            "--script",
            "echo disk full; exit 3",
        ])
        .await?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let said = String::from_utf8(out.stdout)?;
    let id = said.lines().next().unwrap_or_default().to_string();
    assert!(said.contains("disk full"), "the output is printed: {said}");
    assert!(
        String::from_utf8(out.stderr)?.contains(&format!("error: task {id} failed")),
        "the end is said"
    );

    let out = env.chime(&["task", "show", &id[..8]]).await?;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)?.contains(&id));

    // Where it runs, and a program that is not there.
    let out = env
        .chime(&[
            "submit", "--kind", "shell", "--wait", "--cwd", "/tmp", "--", "pwd",
        ])
        .await?;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)?.contains("/tmp\n"));
    let out = env
        .chime(&[
            "submit",
            "--kind",
            "shell",
            "--wait",
            "--",
            "./no-such-script",
        ])
        .await?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8(out.stderr)?;
    assert!(
        said.contains("cannot start \"./no-such-script\" as user ") && said.contains(" in /"),
        "{said}"
    );

    // Every task of this test was made within a few seconds: their first 8 characters are
    // shared, and the CLI says so rather than picking one.
    let out = env.chime(&["task", "show", &id[..8]]).await?;
    if !out.status.success() {
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8(out.stderr)?.contains("give more of it"));
    }
    let out = env.chime(&["task", "show", "01a2"]).await?;
    assert_eq!(out.status.code(), Some(2), "too short: {out:?}");

    // A label, and the command, are what a person searches by.
    let out = env
        .chime(&[
            "submit",
            "--kind",
            "shell",
            "--name",
            "nightly export",
            "--",
            "true",
        ])
        .await?;
    assert!(out.status.success(), "{out:?}");
    let named = last_line(&out);
    let listed = env.chime(&["task", "list", "--text", "NIGHTLY"]).await?;
    let listed = String::from_utf8(listed.stdout)?;
    assert!(
        listed.contains(&named) && listed.contains("\"nightly export\""),
        "{listed}"
    );
    let listed = env.chime(&["task", "list", "--text", "disk full"]).await?;
    let listed = String::from_utf8(listed.stdout)?;
    assert!(listed.contains(&id) && !listed.contains(&named), "{listed}");

    // A worker by its name.
    let workers: serde_json::Value =
        serde_json::from_slice(&env.chime(&["workers", "--json"]).await?.stdout)?;
    let name = workers[0]["name"].as_str().unwrap_or_default().to_string();
    let out = env.chime(&["worker", "drain", &name]).await?;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)?.contains("drain requested"));
    env.cleanup().await
}

/// The API keeps the worker group it found for a kind for a second, yet a kind route set or
/// removed through it applies to the very next `POST /api/v1/tasks`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_route_changed_through_the_api_applies_to_the_next_submission() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let api = env.api_url().to_string();
    let client = chime_tests::http();
    let submit_noop = || async {
        let task: serde_json::Value = client
            .post(format!("{api}/api/v1/tasks"))
            .json(&serde_json::json!({"kind": "noop"}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        anyhow::Ok(task["group"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(submit_noop().await?, "default");
    let ok = |request: reqwest::RequestBuilder| async move {
        request.send().await?.error_for_status()?;
        anyhow::Ok(())
    };
    ok(client
        .post(format!("{api}/api/v1/worker-groups"))
        .json(&serde_json::json!({"name": "etl"})))
    .await?;
    ok(client
        .put(format!("{api}/api/v1/kind-routes/noop"))
        .json(&serde_json::json!({"worker_group": "etl"})))
    .await?;
    assert_eq!(submit_noop().await?, "etl");
    ok(client.delete(format!("{api}/api/v1/kind-routes/noop"))).await?;
    assert_eq!(submit_noop().await?, "default");
    env.cleanup().await
}

/// Lists go by when a task was made, not by its id: a task submitted with a random UUIDv4 id
/// (Python's `uuid.uuid4()`), which sorts above every UUIDv7, lists below a task made after it,
/// and the next page (`--before`) goes on from it in creation order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_with_a_callers_random_id_lists_below_a_newer_task() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let first = env.submit(&["--kind", "noop"]).await?;
    let high = "ffffffff-0b1e-4c3a-9d2e-5f6a7b8c9d0e";
    let chosen = env.submit(&["--kind", "noop", "--id", high]).await?;
    assert_eq!(chosen.to_string(), high);
    let low = "00000000-0b1e-4c3a-9d2e-5f6a7b8c9d0e";
    env.submit(&["--kind", "noop", "--id", low]).await?;
    let newest = env.submit(&["--kind", "noop"]).await?;
    let listed = |out: std::process::Output| -> Result<Vec<String>> {
        anyhow::ensure!(out.status.success(), "{out:?}");
        let tasks: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
        Ok(tasks
            .iter()
            .filter_map(|t| t["id"].as_str().map(str::to_string))
            .collect())
    };
    let all = listed(env.chime(&["task", "list", "--json"]).await?)?;
    assert_eq!(
        all,
        [
            newest.to_string(),
            low.into(),
            high.into(),
            first.to_string()
        ],
        "newest made first"
    );
    // Page by page, two at a time.
    let page = listed(
        env.chime(&["task", "list", "--json", "--limit", "2"])
            .await?,
    )?;
    assert_eq!(page, [newest.to_string(), low.to_string()]);
    let next = listed(
        env.chime(&["task", "list", "--json", "--limit", "2", "--before", low])
            .await?,
    )?;
    assert_eq!(next, [high.to_string(), first.to_string()]);
    env.cleanup().await
}

/// An ad-hoc shell task without a name shows what it runs in lists (the CLI's and the API's
/// summaries), and a named one its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unnamed_ad_hoc_task_lists_its_command() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let argv = env
        .submit(&["--kind", "shell", "--", "echo", "from", "argv"])
        .await?;
    let script = env
        .submit(&["--kind", "shell", "--script", "echo from a script"])
        .await?;
    env.submit(&["--kind", "shell", "--name", "nightly", "--", "true"])
        .await?;
    let out = env.chime(&["task", "list"]).await?;
    let listed = String::from_utf8(out.stdout)?;
    for line in ["$ echo from argv", "$ echo from a script", "\"nightly\""] {
        assert!(listed.contains(line), "{line}: {listed}");
    }
    let out = env.chime(&["task", "list", "--json"]).await?;
    let tasks: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
    let command = |id: Uuid| {
        tasks
            .iter()
            .find(|t| t["id"] == id.to_string())
            .map(|t| t["command"].clone())
            .unwrap_or_default()
    };
    assert_eq!(command(argv), "echo from argv");
    assert_eq!(command(script), "echo from a script");
    env.cleanup().await
}
