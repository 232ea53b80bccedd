//! Scaling out within a connection budget: thirty workers, two schedulers, two dependency
//! services and an API, every pool at its default size, share a PostgreSQL server left at its
//! default `max_connections = 100` and run 5,000 tasks with no connection refused.

use std::time::Duration;

use anyhow::{Result, ensure};
use chime_core::bus::Topology;
use chime_core::model::NewTask;
use chime_core::store::task_lifecycle;
use chime_tests::postgres::PrivatePostgres;
use chime_tests::{TestEnv, eventually, eventually_within};

const WORKERS: usize = 30;
const TASKS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_workers_and_the_services_fit_a_default_server() -> Result<()> {
    let pg = PrivatePostgres::start_with_max_connections(100).await?;
    // Not a superuser: the three sessions PostgreSQL keeps for superusers are not chime's.
    let admin = sqlx::PgPool::connect(&format!("{}/postgres", pg.url())).await?;
    sqlx::query("CREATE ROLE chime LOGIN CREATEDB")
        .execute(&admin)
        .await?;
    let server = format!("postgres://chime@127.0.0.1:{}", pg.port());
    let (_, amqp) = chime_tests::server_urls();
    let env = TestEnv::with_amqp_url(&server, &amqp).await?;

    let logs = std::env::temp_dir().join(format!("chime-scale-{}", env.settings.prefix));
    std::fs::create_dir_all(&logs)?;
    let mut processes = Vec::new();
    let mut spawn = |name: String, args: &[&str]| -> Result<()> {
        let log = std::fs::File::create(logs.join(format!("{name}.log")))?;
        let child = env
            .chime_command(args)?
            .env("CHIME_API_ADDR", &env.settings.api_addr)
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()?;
        env.track(&child);
        processes.push((name, child));
        Ok(())
    };
    spawn("api".into(), &["api"])?;
    for n in 0..2 {
        spawn(format!("scheduler-{n}"), &["scheduler"])?;
        spawn(format!("dependency-{n}"), &["dependency"])?;
    }
    for n in 0..WORKERS {
        spawn(format!("worker-{n}"), &["worker", "--concurrency", "4"])?;
    }
    let online = || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM workers WHERE status = 'online'")
            .fetch_one(env.store.pool())
            .await?;
        anyhow::Ok(n)
    };
    eventually_within("every worker online", Duration::from_secs(120), || async {
        Ok(online().await? == WORKERS as i64)
    })
    .await?;

    // The load: ad-hoc noop tasks in batches, and some through the API's front door.
    let topology = Topology::new(env.settings.prefix.clone());
    let api = format!("{}/api/v1/tasks", env.api_url());
    let http = chime_tests::http();
    eventually("the API to answer", || async {
        Ok(http
            .get(format!("{}/readyz", env.api_url()))
            .send()
            .await?
            .status()
            .is_success())
    })
    .await?;
    let through_api = 200;
    let started = std::time::Instant::now();
    let posts = futures::future::try_join_all((0..8).map(|_| {
        let (http, api) = (http.clone(), api.clone());
        async move {
            for _ in 0..through_api / 8 {
                let answer = http
                    .post(&api)
                    .json(&serde_json::json!({"kind": "noop"}))
                    .send()
                    .await?;
                ensure!(answer.status().as_u16() == 201, "{}", answer.status());
            }
            anyhow::Ok(())
        }
    }));
    let batches = async {
        let mut left = TASKS - through_api;
        while left > 0 {
            let batch = left.min(500);
            left -= batch;
            let tasks = (0..batch)
                .map(|_| NewTask {
                    kind: "noop".into(),
                    ..Default::default()
                })
                .collect();
            task_lifecycle::submit_many(&env.store, &topology, tasks).await?;
        }
        anyhow::Ok(())
    };
    // The peak of chime's sessions while the load runs.
    let peak = std::sync::atomic::AtomicI64::new(0);
    let sessions = || async {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = 'chime'")
                .fetch_one(&admin)
                .await?;
        peak.fetch_max(n, std::sync::atomic::Ordering::Relaxed);
        anyhow::Ok(())
    };
    tokio::try_join!(posts, batches)?;
    let by_status = || async {
        let counts: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, count(*) FROM tasks GROUP BY status ORDER BY status")
                .fetch_all(env.store.pool())
                .await?;
        anyhow::Ok(counts)
    };
    let waited = eventually_within(
        "every task to succeed",
        Duration::from_secs(300),
        || async {
            sessions().await?;
            let counts = by_status().await?;
            Ok(counts == [("succeeded".to_string(), TASKS as i64)])
        },
    )
    .await;
    if let Err(error) = waited {
        anyhow::bail!("{error}; tasks by status: {:?}", by_status().await?);
    }
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "{TASKS} tasks in {:.1} s; peak sessions of chime: {peak} (max_connections = 100)",
        started.elapsed().as_secs_f64()
    );

    // No process was refused a connection, nor waited out its pool.
    for (name, child) in &mut processes {
        ensure!(
            child.try_wait()?.is_none(),
            "{name} exited: {}",
            std::fs::read_to_string(logs.join(format!("{name}.log")))?
        );
    }
    let server_log = pg.log()?;
    ensure!(
        !server_log.contains("too many clients") && !server_log.contains("connection slots"),
        "the server refused connections:\n{server_log}"
    );
    for (name, _) in &processes {
        let log = std::fs::read_to_string(logs.join(format!("{name}.log")))?;
        ensure!(
            !log.contains("too many clients")
                && !log.contains("pool timed out")
                && !log.contains("connection slots"),
            "{name} had a connection error:\n{log}"
        );
    }
    for (_, child) in &mut processes {
        let _ = child.start_kill();
    }
    for (_, child) in &mut processes {
        let _ = child.wait().await;
    }
    let _ = std::fs::remove_dir_all(&logs);
    admin.close().await;
    env.cleanup().await?;
    pg.stop().await
}
