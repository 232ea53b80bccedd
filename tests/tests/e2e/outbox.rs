//! The outbox holds messages while the broker is unreachable and publishes them, once each, when
//! it comes back. The connection is cut through a proxy the test owns, never by stopping RabbitMQ.

use std::collections::HashSet;

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::bus::Topology;
use chime_core::model::{NewTask, TaskMessage, message::decode};
use chime_core::store::{outbox, task_lifecycle};
use chime_tests::{TestEnv, eventually};
use lapin::options::BasicGetOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_holds_messages_through_a_broker_outage() -> Result<()> {
    let (mut env, proxy) = TestEnv::behind_proxy().await?;
    env.start(Services::API).await?;
    let topology = Topology::new(env.settings.prefix.clone());

    proxy.cut();
    let mut ids = HashSet::new();
    for n in 0..50 {
        let submitted = task_lifecycle::submit(
            &env.store,
            &topology,
            NewTask {
                kind: "noop".into(),
                data: serde_json::json!({ "n": n }),
                ..NewTask::default()
            },
        )
        .await?;
        ids.insert(submitted.id);
    }
    // Committed and held: the relay cannot publish.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(outbox::unsent_count(&env.store).await?, 50);

    proxy.restore();
    eventually("the outbox to drain", || async {
        Ok(outbox::unsent_count(&env.store).await? == 0)
    })
    .await?;

    // Exactly the 50 messages, each once, wait in the group's queue of inline tasks (noop).
    let conn = env.amqp().await?;
    let channel = conn.create_channel().await?;
    let queue = topology.inline_queue("default");
    let mut seen = Vec::new();
    while let Some(message) = channel
        .basic_get(queue.clone().into(), BasicGetOptions { no_ack: true })
        .await?
    {
        let task: TaskMessage = decode(&message.delivery.data)?;
        seen.push(task.task_id);
    }
    assert_eq!(seen.len(), 50, "nothing lost, nothing twice");
    assert_eq!(seen.into_iter().collect::<HashSet<_>>(), ids);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_resumes_after_its_broker_connection_is_cut() -> Result<()> {
    let (mut env, proxy) = TestEnv::behind_proxy().await?;
    env.start(Services::ALL).await?;
    let topology = Topology::new(env.settings.prefix.clone());
    let noop = || NewTask {
        kind: "noop".into(),
        ..NewTask::default()
    };
    let before = task_lifecycle::submit(&env.store, &topology, noop()).await?;
    env.wait_status(before.id, chime_core::model::TaskStatus::Succeeded)
        .await?;

    proxy.cut();
    let during = task_lifecycle::submit(&env.store, &topology, noop()).await?;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    proxy.restore();
    let after = task_lifecycle::submit(&env.store, &topology, noop()).await?;
    for id in [during.id, after.id] {
        let task = env
            .wait_status(id, chime_core::model::TaskStatus::Succeeded)
            .await?;
        assert_eq!(task.attempts.len(), 1);
    }
    env.cleanup().await
}
