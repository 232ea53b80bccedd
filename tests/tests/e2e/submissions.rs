//! Submissions in bulk through every door: AMQP submissions recorded a batch at a time, each
//! keeping its own fate; `POST /api/v1/tasks/batch`, all or nothing; single requests that share
//! commits and still fail alone; `chime submit --file`.

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_core::bus::{Topology, publish_confirmed};
use chime_core::model::{NewTask, TaskStatus, message::SubmitMessage};
use chime_tests::{TestEnv, eventually, http};
use lapin::options::ConfirmSelectOptions;
use lapin::types::FieldTable;
use serde_json::{Value, json};
use uuid::Uuid;

/// How many tasks the store holds.
async fn task_count(env: &TestEnv) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(env.store.pool())
        .await?)
}

fn noop(id: Uuid) -> Vec<u8> {
    SubmitMessage(NewTask {
        id: Some(id),
        kind: "noop".into(),
        ..NewTask::default()
    })
    .encode()
}

/// A confirming channel to an installation's `<prefix>.submit`, as any AMQP client publishes.
struct SubmitQueue {
    conn: lapin::Connection,
    channel: lapin::Channel,
    topology: Topology,
}

impl SubmitQueue {
    async fn open(env: &TestEnv) -> Result<Self> {
        let topology = Topology::new(env.settings.prefix.clone());
        let conn = env.amqp().await?;
        let channel = conn.create_channel().await?;
        topology.declare(&channel).await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self {
            conn,
            channel,
            topology,
        })
    }

    /// Publishes `body` and waits for the broker's confirm.
    async fn publish(&self, body: Vec<u8>) -> Result<()> {
        let submit = self.topology.submit_exchange();
        publish_confirmed(
            &self.channel,
            &submit,
            &submit,
            &body,
            FieldTable::default(),
        )
        .await?;
        Ok(())
    }

    /// How many submissions wait in the queue, not yet delivered to a worker.
    async fn waiting(&self) -> Result<u32> {
        chime_tests::queue_depth(&self.channel, &self.topology.submit_exchange()).await
    }

    async fn close(self) {
        let _ = self.conn.close(200, "done".into()).await;
    }
}

/// Submissions waiting in the queue when the worker comes are taken as one batch: the good ones
/// are recorded together, a duplicate id makes one task, and a message that does not decode and
/// one of an unknown kind are dead-lettered alone with their reasons. The same ids published
/// again make nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_submissions_in_one_batch_each_keep_their_own_fate() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let queue = SubmitQueue::open(&env).await?;
    let topology = queue.topology.clone();
    let publish = |body: Vec<u8>| queue.publish(body);
    let ids: Vec<Uuid> = (0..40).map(|_| Uuid::now_v7()).collect();
    for (i, id) in ids.iter().enumerate() {
        publish(noop(*id)).await?;
        if i == 10 {
            publish(b"{not json".to_vec()).await?;
            publish(noop(ids[0])).await?;
            let unknown = SubmitMessage(NewTask {
                id: Some(Uuid::now_v7()),
                kind: "no-such-kind".into(),
                ..NewTask::default()
            });
            publish(unknown.encode()).await?;
        }
    }
    env.start(Services::WORKER).await?;
    let reasons = chime_tests::wait_dead_letters(&topology, 2).await?;
    assert!(
        reasons.iter().any(|r| r.contains("no-such-kind")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("key must be a string")
            || r.contains("expected")
            || r.contains("JSON")),
        "{reasons:?}"
    );
    for id in &ids {
        assert_eq!(env.wait_terminal(*id).await?.status, TaskStatus::Succeeded);
    }
    assert_eq!(task_count(&env).await?, 40);
    // Published again, and a new one after them: once the new one is a task, the others have
    // been taken (one consumer, in order), and made nothing.
    for id in &ids {
        publish(noop(*id)).await?;
    }
    let last = Uuid::now_v7();
    publish(noop(last)).await?;
    env.wait_terminal(last).await?;
    assert_eq!(task_count(&env).await?, 41);
    queue.close().await;
    env.cleanup().await
}

/// A batch over HTTP is written whole or not at all: one bad submission is a 422 naming its
/// index and field and leaves no task; a good batch answers each id in order, and the same ids
/// again are not created twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_batch_is_all_or_nothing_and_names_its_bad_submission() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let url = format!("{}/api/v1/tasks/batch", env.api_url());
    let post = |body: Value| {
        let url = url.clone();
        async move {
            let response = http().post(url).json(&body).send().await?;
            let status = response.status().as_u16();
            let body: Value = response.json().await?;
            Ok::<_, anyhow::Error>((status, body))
        }
    };
    let (status, body) = post(json!({"tasks": [
        {"kind": "noop"},
        {"kind": "noop", "timeout_ms": -5},
        {"kind": "noop"},
    ]}))
    .await?;
    assert_eq!(status, 422, "{body}");
    let error = body["error"].as_str().context("error")?;
    assert!(
        error.starts_with("tasks[1]") && error.contains("timeout_ms"),
        "{error}"
    );
    let (status, body) = post(json!({"tasks": [
        {"kind": "noop"},
        {"kind": "no-such-kind"},
    ]}))
    .await?;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]
            .as_str()
            .context("error")?
            .starts_with("tasks[1]"),
        "{body}"
    );
    let (status, body) = post(json!({"tasks": [
        {"kind": "noop"},
        {"kind": "noop", "data_time": "-005000-01-01T00:00:00Z"},
    ]}))
    .await?;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]
            .as_str()
            .context("error")?
            .starts_with("tasks[1]"),
        "{body}"
    );
    let (status, body) = post(json!({"tasks": []})).await?;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        task_count(&env).await?,
        0,
        "nothing written by a refused batch"
    );

    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
    let batch = json!({"tasks": [
        {"kind": "noop", "id": ids[0]},
        {"kind": "shell", "spec": {"command": ["true"]}, "id": ids[1], "name": "second"},
        {"kind": "noop", "id": ids[2]},
        {"kind": "noop", "id": ids[0]},
    ]});
    let (status, body) = post(batch.clone()).await?;
    assert_eq!(status, 201, "{body}");
    let answered: Vec<(String, bool)> = body["tasks"]
        .as_array()
        .context("tasks")?
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap_or_default().to_string(),
                t["created"] == json!(true),
            )
        })
        .collect();
    let expected: Vec<(String, bool)> = vec![
        (ids[0].to_string(), true),
        (ids[1].to_string(), true),
        (ids[2].to_string(), true),
        (ids[0].to_string(), false),
    ];
    assert_eq!(answered, expected);
    assert_eq!(env.task(ids[1]).await?.name.as_deref(), Some("second"));
    let (status, body) = post(batch).await?;
    assert_eq!(status, 201, "{body}");
    assert!(
        body["tasks"]
            .as_array()
            .context("tasks")?
            .iter()
            .all(|t| t["created"] == json!(false)),
        "{body}"
    );
    assert_eq!(task_count(&env).await?, 3);
    env.cleanup().await
}

/// Single submissions sent at once share commits, yet each is answered for itself: the one with
/// an unknown kind and the one whose data PostgreSQL cannot store (a NUL character) fail alone,
/// every other is a task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_submissions_sent_together_fail_alone() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let url = format!("{}/api/v1/tasks", env.api_url());
    let client = http();
    let requests = (0..40).map(|i| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let kind = if i == 17 { "no-such-kind" } else { "noop" };
            let data = if i == 23 {
                json!({"text": "a\u{0}b"})
            } else {
                json!({})
            };
            let response = client
                .post(url)
                .json(&json!({"kind": kind, "name": format!("n{i}"), "data": data}))
                .send()
                .await?;
            let status = response.status().as_u16();
            let body: Value = response.json().await?;
            Ok::<_, anyhow::Error>((i, status, body))
        }
    });
    let answers = futures::future::try_join_all(requests).await?;
    for (i, status, body) in &answers {
        if *i == 17 {
            assert_eq!(*status, 400, "{body}");
            assert!(
                body["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("no-such-kind")
            );
        } else if *i == 23 {
            assert!(matches!(status, 400 | 422), "{status} {body}");
        } else {
            assert_eq!(*status, 201, "{body}");
            assert_eq!(body["name"], json!(format!("n{i}")), "{body}");
            assert_eq!(body["status"], json!("ready"), "{body}");
        }
    }
    eventually("38 tasks", || async { Ok(task_count(&env).await? == 38) }).await?;
    env.cleanup().await
}

/// `chime submit --file` sends every line, prints an id a line in order, and an error names its
/// line, writing nothing of its batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_file_sends_every_line_and_names_a_bad_one() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let dir = std::env::temp_dir().join(format!("chime-submit-file-{}", Uuid::now_v7()));
    std::fs::create_dir_all(&dir)?;
    let good = dir.join("good.jsonl");
    let id = Uuid::now_v7();
    std::fs::write(
        &good,
        format!(
            "{{\"kind\":\"noop\",\"id\":\"{id}\"}}\n\n{{\"kind\":\"shell\",\"spec\":{{\"command\":\"true\"}},\"name\":\"two\"}}\n{{\"kind\":\"noop\"}}\n"
        ),
    )?;
    let out = env
        .chime(&["submit", "--file", &good.to_string_lossy()])
        .await?;
    anyhow::ensure!(out.status.success(), "{out:?}");
    let ids: Vec<Uuid> = String::from_utf8(out.stdout)?
        .lines()
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], id);
    assert_eq!(env.task(ids[1]).await?.name.as_deref(), Some("two"));

    for (lines, says) in [
        ("{\"kind\":\"noop\"}\n{\"kind\": noop}\n", "line 2:"),
        (
            "{\"kind\":\"noop\"}\n\n{\"kind\":\"no-such-kind\"}\n",
            "line 3:",
        ),
    ] {
        let bad = dir.join("bad.jsonl");
        std::fs::write(&bad, lines)?;
        let out = env
            .chime(&["submit", "--file", &bad.to_string_lossy()])
            .await?;
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("error: ") && stderr.contains(says),
            "{stderr}"
        );
        assert!(stderr.contains("nothing was submitted"), "{stderr}");
    }
    assert_eq!(task_count(&env).await?, 3, "nothing more was written");
    std::fs::remove_dir_all(&dir)?;
    env.cleanup().await
}

/// A noop submission whose attempt runs again if its worker dies under it.
fn recovering_noop(id: Uuid) -> Vec<u8> {
    SubmitMessage(NewTask {
        id: Some(id),
        kind: "noop".into(),
        requests_recovery: Some(true),
        ..NewTask::default()
    })
    .encode()
}

/// AMQP submissions through a worker killed with -9 in the middle of its batches, then through
/// a PostgreSQL outage while the next worker holds a batch it cannot record: every submission
/// with an id becomes exactly one task, none is lost, and only the poison is dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_submissions_survive_a_killed_worker_and_a_database_outage() -> Result<()> {
    let pg = chime_tests::postgres::PrivatePostgres::start().await?;
    let (_, amqp) = chime_tests::server_urls();
    let mut env = TestEnv::with_amqp_url(&pg.url(), &amqp).await?;
    // Recovery of the killed worker's attempts is the scheduler's.
    env.start(Services::SCHEDULER).await?;
    let queue = SubmitQueue::open(&env).await?;
    let topology = queue.topology.clone();
    let publish = |body: Vec<u8>| queue.publish(body);
    let before: Vec<Uuid> = (0..3000).map(|_| Uuid::now_v7()).collect();
    for (i, id) in before.iter().enumerate() {
        publish(recovering_noop(*id)).await?;
        if i == 1500 {
            publish(b"poison before the kill".to_vec()).await?;
        }
    }
    // Small batches (150 of them), so that the kill lands between the first commit and the last.
    let batches = [("CHIME_WORKER__SUBMIT_BATCH", "20")];
    let mut first = env.spawn_chime_with(&["worker", "--concurrency", "4"], &batches)?;
    eventually("the first batch to be recorded", || async {
        Ok(task_count(&env).await? > 0)
    })
    .await?;
    chime_tests::kill9(&mut first).await?;
    let recorded = task_count(&env).await?;
    assert!(
        recorded < 3000,
        "the kill came after every submission was recorded ({recorded})"
    );

    let mut second = env.spawn_chime_with(&["worker", "--concurrency", "4"], &batches)?;
    eventually("the submissions before the kill to be recorded", || async {
        Ok(task_count(&env).await? == 3000)
    })
    .await?;
    pg.stop().await?;
    // Fewer than the worker's prefetch (twice its batch), so that it holds all of them.
    let during: Vec<Uuid> = (0..30).map(|_| Uuid::now_v7()).collect();
    for (i, id) in during.iter().enumerate() {
        publish(recovering_noop(*id)).await?;
        if i == 15 {
            publish(b"poison during the outage".to_vec()).await?;
        }
    }
    // The worker takes them and holds them unacked while it cannot record them.
    eventually(
        "the worker to hold the submissions made during the outage",
        || async { Ok(queue.waiting().await? == 0) },
    )
    .await?;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    pg.resume().await?;

    for id in before.iter().chain(&during) {
        assert_eq!(env.wait_terminal(*id).await?.status, TaskStatus::Succeeded);
    }
    assert_eq!(task_count(&env).await?, 3030, "one task per id");
    let reasons = chime_tests::wait_dead_letters(&topology, 2).await?;
    assert_eq!(
        reasons.len(),
        2,
        "only the poison is dead-lettered: {reasons:?}"
    );
    assert_eq!(chime_tests::dead_letters(&topology).await?, 0);
    second.kill().await?;
    queue.close().await;
    env.cleanup().await?;
    pg.destroy().await;
    Ok(())
}

/// A noop task taken, at its submission, by a worker registered as `ghost` that never starts it:
/// its id, and the ghost's.
async fn taken_by_a_ghost(env: &TestEnv) -> Result<(Uuid, Uuid)> {
    use chime_core::store::task_lifecycle::{self, WorkerIdentity};
    use chime_core::store::workers::{self, NewWorker};
    let topology = Topology::new(env.settings.prefix.clone());
    let ghost = WorkerIdentity {
        id: Uuid::now_v7(),
        name: "ghost".into(),
    };
    workers::register(
        &env.store,
        NewWorker {
            identity: &ghost,
            host: "gone",
            pid: 1,
            groups: &["default".to_string()],
            kinds: &["noop".to_string()],
            concurrency: 1,
            inline_concurrency: 1,
            lease: workers::LEASE,
        },
    )
    .await?;
    let task = NewTask {
        id: Some(Uuid::now_v7()),
        kind: "noop".into(),
        ..NewTask::default()
    };
    let (told, taken) = task_lifecycle::submit_routed_taking(
        &env.store,
        &topology,
        &ghost,
        &[(&task, "default")],
        &[true],
    )
    .await?;
    assert!(told[0].created);
    assert_eq!(taken.len(), 1, "the task is the ghost's to start");
    Ok((told[0].id, ghost.id))
}

/// Starts a live worker, and a scheduler once the worker's queues exist (before that, nothing
/// may publish a task message); then waits for `id` to succeed on the live worker, as its first
/// attempt.
async fn runs_on_the_live_worker(env: &mut TestEnv, id: Uuid) -> Result<()> {
    env.start(Services::WORKER).await?;
    eventually("the live worker to be online", || async {
        let online: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM workers WHERE status = 'online' AND name <> 'ghost'",
        )
        .fetch_one(env.store.pool())
        .await?;
        Ok(online == 1)
    })
    .await?;
    env.start(Services::SCHEDULER).await?;
    let view = env.wait_terminal(id).await?;
    assert_eq!(view.status, TaskStatus::Succeeded);
    assert_eq!(view.attempt, 1, "it ran as its first attempt");
    let ran_on = view.attempts.first().and_then(|a| a.worker.clone());
    assert!(
        ran_on.as_deref().is_some_and(|w| w != "ghost"),
        "it ran on the live worker: {ran_on:?}"
    );
    Ok(())
}

/// A worker's status as its row records it.
async fn worker_status(env: &TestEnv, id: Uuid) -> Result<String> {
    Ok(
        sqlx::query_scalar("SELECT status FROM workers WHERE id = $1")
            .bind(id)
            .fetch_one(env.store.pool())
            .await?,
    )
}

/// A worker runs the submissions it records itself when it has a slot free, so their tasks have
/// no message until they start. One that took a task and died before starting it: once it is
/// declared gone, a scheduler publishes the task's message and another worker runs it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_taken_by_a_worker_that_died_before_starting_it_runs_elsewhere() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let (id, ghost) = taken_by_a_ghost(&env).await?;
    runs_on_the_live_worker(&mut env, id).await?;
    let ghost_status = worker_status(&env, ghost).await?;
    assert_eq!(ghost_status, "offline");
    env.cleanup().await
}

/// A worker alive that took a task and never started it (it lost the answer to its commit, and
/// so never knew it took it): a scheduler publishes the task's message anyway, seconds later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_taken_by_a_live_worker_that_never_starts_it_runs_elsewhere() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let (id, ghost) = taken_by_a_ghost(&env).await?;
    // Alive, as far as the database can tell, for the whole test.
    sqlx::query("UPDATE workers SET lease_expires_at = now() + interval '1 hour' WHERE id = $1")
        .bind(ghost)
        .execute(env.store.pool())
        .await?;
    runs_on_the_live_worker(&mut env, id).await?;
    let ghost_status = worker_status(&env, ghost).await?;
    assert_ne!(ghost_status, "offline", "the ghost was never declared dead");
    env.cleanup().await
}

/// Submissions a worker records for its own group and kinds run there without a task message:
/// every one succeeds, and, with taking turned off, every one goes through the group's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_runs_the_submissions_it_takes_and_can_be_told_not_to() -> Result<()> {
    for take in [true, false] {
        let mut env = TestEnv::new().await?;
        env.settings.worker.take_submissions = take;
        env.start(Services::WORKER).await?;
        let queue = SubmitQueue::open(&env).await?;
        let ids: Vec<Uuid> = (0..50).map(|_| Uuid::now_v7()).collect();
        for id in &ids {
            queue.publish(noop(*id)).await?;
        }
        for id in &ids {
            assert_eq!(env.wait_terminal(*id).await?.status, TaskStatus::Succeeded);
        }
        let messages = task_messages(&env).await?;
        messages_say_taken(take, messages);
        queue.close().await;
        env.stop().await?;
        env.cleanup().await?;
    }
    Ok(())
}

/// Of 50 tasks that wrote `messages` task messages: with taking on, the worker took some of
/// them; with it off, each went through the group's queue.
fn messages_say_taken(take: bool, messages: i64) {
    if take {
        assert!(
            messages < 50,
            "the worker took none of them ({messages} messages)"
        );
    } else {
        assert_eq!(messages, 50, "each goes through the group's queue");
    }
}

/// How many task messages an installation wrote for the broker (the relay's batched outbox rows).
async fn task_messages(env: &TestEnv) -> Result<i64> {
    let topology = Topology::new(env.settings.prefix.clone());
    Ok(sqlx::query_scalar(
        "SELECT coalesce(sum(CASE WHEN batched THEN jsonb_array_length(body) ELSE 1 END), 0)
         FROM outbox WHERE exchange = $1",
    )
    .bind(topology.tasks_exchange())
    .fetch_one(env.store.pool())
    .await?)
}

/// The sum of a counter in an API's `/metrics`.
async fn counter(env: &TestEnv, name: &str) -> Result<f64> {
    let text = http()
        .get(format!("{}/metrics", env.api_url()))
        .send()
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// `clients` concurrent clients, each posting `submission` (of a fresh id each time) to `url`
/// until a request is not answered with success (or within `timeout`); each ends with every id it
/// sent, the one whose answer never came too, so that the test can send them all again.
fn clients_sending_until_refused(
    clients: usize,
    url: &str,
    timeout: Option<std::time::Duration>,
    submission: fn(&Uuid) -> Value,
) -> Vec<tokio::task::JoinHandle<Vec<Uuid>>> {
    (0..clients)
        .map(|_| {
            let url = url.to_string();
            tokio::spawn(async move {
                let client = http();
                let mut sent = Vec::new();
                loop {
                    let id = Uuid::now_v7();
                    sent.push(id);
                    let mut request = client.post(&url).json(&submission(&id));
                    if let Some(timeout) = timeout {
                        request = request.timeout(timeout);
                    }
                    match request.send().await {
                        Ok(response) if response.status().is_success() => {}
                        _ => return sent,
                    }
                }
            })
        })
        .collect()
}

/// Posts a noop task through `POST /api/v1/tasks`, returning its id.
async fn post_noop(client: &reqwest::Client, url: &str) -> Result<Uuid> {
    let response = client
        .post(url)
        .json(&json!({"kind": "noop"}))
        .send()
        .await?;
    anyhow::ensure!(response.status() == 201, "HTTP {}", response.status());
    let body: Value = response.json().await?;
    Ok(body["id"].as_str().context("no id")?.parse()?)
}

/// `POST /api/v1/tasks` into a process that also runs a worker (`chime up`): the worker takes
/// the noop tasks it has a slot for, so they run with no task message; with taking turned off,
/// every one goes through the group's queue. Either way every one succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_requests_into_a_process_with_a_worker_are_taken_and_can_be_told_not_to()
-> Result<()> {
    for take in [true, false] {
        let mut env = TestEnv::new().await?;
        env.settings.worker.take_submissions = take;
        env.start(Services {
            worker: true,
            ..Services::API
        })
        .await?;
        let url = format!("{}/api/v1/tasks", env.api_url());
        let client = http();
        // The API answers before the worker consumes: wait for the worker, as a user would.
        let mut ids = Vec::new();
        if take {
            eventually("the worker to take a task", || async {
                post_noop(&client, &url).await?;
                Ok(counter(&env, "chime_worker_submissions_taken_total").await? >= 1.0)
            })
            .await?;
        } else {
            eventually("the worker to be online", || async {
                let online: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM workers WHERE status = 'online'")
                        .fetch_one(env.store.pool())
                        .await?;
                Ok(online == 1)
            })
            .await?;
        }
        let before = task_messages(&env).await?;
        for _ in 0..50 {
            ids.push(post_noop(&client, &url).await?);
        }
        for id in &ids {
            assert_eq!(env.wait_terminal(*id).await?.status, TaskStatus::Succeeded);
        }
        let messages = task_messages(&env).await? - before;
        messages_say_taken(take, messages);
        env.cleanup().await?;
    }
    Ok(())
}

/// A `chime up` killed with -9 while clients send it single requests, which its worker takes:
/// every id a client sent (again, by id, to the next `chime up` if its answer was lost) becomes
/// exactly one task, and every task succeeds. What the killed process was running runs again
/// (`requests_recovery`); what it took and had not started, a scheduler publishes once the
/// process is declared gone (that path alone: the ghost tests above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_requests_taken_by_a_killed_process_all_run() -> Result<()> {
    let env = TestEnv::new().await?;
    let up = || env.spawn_chime(&["up", "--api-addr", env.settings.api_addr.as_str()]);
    let ready = format!("{}/readyz", env.api_url());
    let wait_ready = || async {
        eventually("chime up to be ready", || async {
            Ok(http().get(&ready).send().await?.status().is_success())
        })
        .await
    };
    let mut first = up()?;
    wait_ready().await?;
    let url = format!("{}/api/v1/tasks", env.api_url());
    let submission = |id: &Uuid| json!({"id": id, "kind": "noop", "spec": {"sleep_ms": 300}, "requests_recovery": true});
    // Eight clients, each sending until the process is gone.
    let clients = clients_sending_until_refused(8, &url, None, submission);
    eventually("the first process to take tasks", || async {
        Ok(counter(&env, "chime_worker_submissions_taken_total").await? >= 20.0)
    })
    .await?;
    chime_tests::kill9(&mut first).await?;
    let mut ids = Vec::new();
    for client in clients {
        ids.extend(client.await?);
    }

    let mut second = up()?;
    wait_ready().await?;
    // Every id again: one the first process made is answered 200 and makes no second task.
    let client = http();
    for id in &ids {
        let response = client.post(&url).json(&submission(id)).send().await?;
        assert!(response.status().is_success(), "{}", response.text().await?);
    }
    for id in &ids {
        assert_eq!(env.wait_terminal(*id).await?.status, TaskStatus::Succeeded);
    }
    assert_eq!(
        task_count(&env).await?,
        i64::try_from(ids.len())?,
        "one task per id"
    );
    second.kill().await?;
    env.cleanup().await
}

/// PostgreSQL stopped while single requests flow into a process whose worker takes them, then
/// started again: every id a client sent (again, by id, once the store is back, if its answer
/// never came) ends `succeeded` after one attempt. A request whose commit's answer was lost may
/// have made a task taken by the worker that never heard of it: a scheduler publishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_requests_taken_through_a_database_outage_all_run_once() -> Result<()> {
    let pg = chime_tests::postgres::PrivatePostgres::start().await?;
    let (_, amqp) = chime_tests::server_urls();
    let mut env = TestEnv::with_amqp_url(&pg.url(), &amqp).await?;
    env.start(Services::ALL).await?;
    let url = format!("{}/api/v1/tasks", env.api_url());
    let warm = http();
    eventually("the worker to take a task", || async {
        post_noop(&warm, &url).await?;
        Ok(counter(&env, "chime_worker_submissions_taken_total").await? >= 1.0)
    })
    .await?;
    // Four clients, each sending until a request fails (the store is gone).
    let clients = clients_sending_until_refused(
        4,
        &url,
        Some(std::time::Duration::from_secs(2)),
        |id| json!({"id": id, "kind": "noop"}),
    );
    eventually("the worker to take tasks from the clients", || async {
        Ok(counter(&env, "chime_worker_submissions_taken_total").await? >= 50.0)
    })
    .await?;
    pg.stop().await?;
    let mut ids = Vec::new();
    for client in clients {
        ids.extend(client.await?);
    }
    pg.resume().await?;

    let client = http();
    for id in &ids {
        eventually("the id to be accepted again", || async {
            let response = client
                .post(&url)
                .json(&json!({"id": id, "kind": "noop"}))
                .send()
                .await?;
            Ok(response.status().is_success())
        })
        .await?;
    }
    for id in &ids {
        let view = env.wait_terminal(*id).await?;
        assert_eq!(view.status, TaskStatus::Succeeded);
        assert_eq!(view.attempt, 1, "{id} ran once");
        assert_eq!(view.attempts.len(), 1, "{id} ran once");
    }
    env.cleanup().await?;
    pg.destroy().await;
    Ok(())
}

/// Which of `ids` are tasks of `env`'s store.
async fn ids_recorded(env: &TestEnv, ids: &[Uuid]) -> Result<Vec<Uuid>> {
    Ok(
        sqlx::query_scalar("SELECT id FROM tasks WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(env.store.pool())
            .await?,
    )
}

/// Issue 42, 5a: stop, start and publish at once, round after round, on one prefix with a fresh
/// database each round, as an operator replacing an installation does: the previous `chime up`
/// is told to stop (not waited for) as the next one starts, and 500 submissions with ids go out
/// without publisher confirms, half the moment the old one is told to stop and half the moment
/// the new one is ready. Every id becomes one task each round, none lost, held or recorded
/// twice: those published once the new one is ready in the new store, the others there too but
/// for what the old process took before it heard the signal (recorded in its own store). Before
/// the fix the old process went on consuming while it recorded its draining status, and 8 to 46
/// of 500 submissions went to the store no one read any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_start_and_publish_at_once_makes_every_id_one_task_every_round() -> Result<()> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    const ROUNDS: usize = 5;
    const EACH: usize = 500;
    let mut envs: Vec<TestEnv> = Vec::new();
    let mut running: Vec<tokio::process::Child> = Vec::new();
    let mut prefix = None;
    for round in 0..ROUNDS {
        let mut env = TestEnv::new().await?;
        let prefix = prefix.get_or_insert_with(|| env.settings.prefix.clone());
        env.settings.prefix = prefix.clone();
        // As a client in a hurry publishes: no confirms, the connection kept until the end.
        let topology = Topology::new(prefix.clone());
        let conn = env.amqp().await?;
        let channel = conn.create_channel().await?;
        if round == 0 {
            // Declared as a client (or the first installation) declares it.
            topology.declare(&channel).await?;
        }
        let submit = topology.submit_exchange();
        let ids: Vec<Uuid> = (0..EACH).map(|_| Uuid::now_v7()).collect();
        let (early, late) = ids.split_at(EACH / 2);
        let publish = |ids: &[Uuid]| {
            let ids = ids.to_vec();
            let (channel, submit) = (channel.clone(), submit.clone());
            async move {
                for id in ids {
                    channel
                        .basic_publish(
                            submit.as_str().into(),
                            submit.as_str().into(),
                            lapin::options::BasicPublishOptions::default(),
                            &noop(id),
                            lapin::BasicProperties::default().with_delivery_mode(2),
                        )
                        .await?;
                }
                anyhow::Ok(())
            }
        };
        // Half the moment the previous process is told to stop: they wait for the next one.
        if let Some(previous) = running.last()
            && let Some(pid) = previous.id()
        {
            kill(Pid::from_raw(i32::try_from(pid)?), Signal::SIGTERM)?;
        }
        publish(early).await?;
        let up = env
            .chime_command(&["up", "--api-addr", env.settings.api_addr.as_str()])?
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        running.push(up);
        let ready = format!("{}/readyz", env.api_url());
        eventually("chime up to be ready", || async {
            Ok(http().get(&ready).send().await?.status().is_success())
        })
        .await?;
        // The other half the moment the new one is ready.
        publish(late).await?;
        // A submission delivered to the old process before it heard the signal is its to
        // record, in its own store; nothing may be lost, held or recorded twice.
        let previous = envs.last();
        let recorded = eventually("every id to become a task", || async {
            let mut found = ids_recorded(&env, &ids).await?.len();
            if let Some(previous) = previous {
                found += ids_recorded(previous, &ids).await?.len();
            }
            Ok(found == EACH)
        })
        .await;
        let in_new = ids_recorded(&env, &ids).await?;
        let in_old = match previous {
            Some(previous) => ids_recorded(previous, &ids).await?,
            None => Vec::new(),
        };
        if let Err(error) = recorded {
            let missing = ids
                .iter()
                .filter(|id| !in_new.contains(id) && !in_old.contains(id))
                .count();
            anyhow::bail!("round {round}: {error:#}; {missing} of {EACH} ids have no task");
        }
        assert!(
            in_old.iter().all(|id| !in_new.contains(id)),
            "round {round}: an id recorded by both processes"
        );
        assert!(
            late.iter().all(|id| in_new.contains(id)),
            "round {round}: a submission published once the new process was ready went elsewhere"
        );
        eprintln!(
            "round {round}: {} recorded by the new process, {} by the one stopping",
            in_new.len(),
            in_old.len()
        );
        let _ = conn.close(200, "done".into()).await;
        envs.push(env);
    }
    for mut up in running {
        if let Some(pid) = up.id() {
            let _ = kill(Pid::from_raw(i32::try_from(pid)?), Signal::SIGTERM);
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), up.wait()).await;
    }
    for env in envs {
        env.cleanup().await?;
    }
    Ok(())
}

/// A submission with `reply_to` is answered with the request's `correlation_id`: `created` once
/// recorded (`false` for the same id again), or `refused` with the dead letter's reason (an
/// unknown kind named). Through RabbitMQ's direct reply-to, as an RPC client does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submissions_with_reply_to_are_answered() -> Result<()> {
    use futures::StreamExt as _;
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let queue = SubmitQueue::open(&env).await?;
    let mut replies = queue
        .channel
        .basic_consume(
            "amq.rabbitmq.reply-to".into(),
            "replies".into(),
            lapin::options::BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let submit = queue.topology.submit_exchange();
    let ask = |body: Vec<u8>, correlation: &'static str| {
        let (channel, submit) = (queue.channel.clone(), submit.clone());
        async move {
            channel
                .basic_publish(
                    submit.as_str().into(),
                    submit.as_str().into(),
                    lapin::options::BasicPublishOptions::default(),
                    &body,
                    lapin::BasicProperties::default()
                        .with_reply_to("amq.rabbitmq.reply-to".into())
                        .with_correlation_id(correlation.into()),
                )
                .await?
                .await?;
            anyhow::Ok(())
        }
    };
    let mut answer = async || -> Result<(String, Value)> {
        let delivery = tokio::time::timeout(std::time::Duration::from_secs(30), replies.next())
            .await
            .context("no reply within 30 s")?
            .context("the reply consumer ended")??;
        let correlation = delivery
            .properties
            .correlation_id()
            .as_ref()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default();
        Ok((correlation, serde_json::from_slice(&delivery.data)?))
    };
    let id = Uuid::now_v7();
    ask(noop(id), "first").await?;
    assert_eq!(
        answer().await?,
        ("first".into(), json!({"id": id, "created": true}))
    );
    ask(noop(id), "again").await?;
    assert_eq!(
        answer().await?,
        ("again".into(), json!({"id": id, "created": false}))
    );
    let refused = Uuid::now_v7();
    let teleport = SubmitMessage(NewTask {
        id: Some(refused),
        kind: "teleport".into(),
        ..NewTask::default()
    })
    .encode();
    ask(teleport, "unknown").await?;
    let (correlation, body) = answer().await?;
    assert_eq!(correlation, "unknown");
    assert_eq!(body["id"], json!(refused));
    assert!(
        body["refused"]
            .as_str()
            .is_some_and(|r| r.contains("teleport")),
        "{body}"
    );
    queue.close().await;
    env.cleanup().await
}
