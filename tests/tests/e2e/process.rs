//! `chime up` and `chime migrate` as real processes: start, serve, stop cleanly on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use chime_core::model::TaskStatus;
use chime_tests::{TestEnv, chime_binary, eventually, http, last_line};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chime_up_serves_and_stops_cleanly_on_sigterm() -> Result<()> {
    let env = TestEnv::new().await?;
    let mut up = tokio::process::Command::new(chime_binary()?)
        .args(["up", "--api-addr", env.settings.api_addr.as_str()])
        .env("CHIME_WORKER__ALLOW_OPEN_STORE", "true")
        .env("CHIME_DATABASE_URL", &env.settings.database_url)
        .env("CHIME_AMQP_URL", &env.settings.amqp_url)
        .env("CHIME_PREFIX", &env.settings.prefix)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let ready = format!("{}/readyz", env.api_url());
    eventually("chime up to be ready", || async {
        Ok(http().get(&ready).send().await?.status().is_success())
    })
    .await?;

    let out = env.chime(&["submit", "--kind", "noop"]).await?;
    let id: Uuid = last_line(&out).parse()?;
    assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Succeeded);
    let workers = env.chime(&["workers", "--json"]).await?;
    let workers: serde_json::Value = serde_json::from_slice(&workers.stdout)?;
    assert_eq!(workers[0]["status"], "online");

    let pid = up.id().context("chime up has a pid")?;
    kill(Pid::from_raw(i32::try_from(pid)?), Signal::SIGTERM)?;
    let status = tokio::time::timeout(Duration::from_secs(30), up.wait())
        .await
        .context("chime up did not stop within 30 s of SIGTERM")??;
    assert!(status.success(), "exit status {status:?}");
    let status: String = sqlx::query_scalar("SELECT status FROM workers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(status, "offline");
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chime_migrate_creates_and_migrates_a_missing_database() -> Result<()> {
    let env = TestEnv::new().await?;
    // Point migrate at a database that does not exist yet.
    let (pg, _) = chime_tests::server_urls();
    let fresh = format!("{}_m", env.database);
    let out = tokio::process::Command::new(chime_binary()?)
        .args(["migrate", "--database-url", &format!("{pg}/{fresh}")])
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .output()
        .await?;
    assert!(out.status.success(), "{out:?}");
    let admin = sqlx::PgPool::connect(&format!("{pg}/{fresh}")).await?;
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables
         WHERE table_schema = 'public' AND table_name IN ('tasks', 'outbox', 'fired_triggers')",
    )
    .fetch_one(&admin)
    .await?;
    assert_eq!(tables, 3);
    admin.close().await;
    let root = sqlx::PgPool::connect(&format!("{pg}/postgres")).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{fresh}\" WITH (FORCE)"
    )))
    .execute(&root)
    .await?;
    root.close().await;
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_override_environment_which_overrides_chime_toml() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(chime_cli::commands::services::Services::ALL)
        .await?;
    let dir = std::env::temp_dir().join(format!("chime-config-{}", Uuid::now_v7()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("chime.toml"), "api_url = \"http://127.0.0.1:9\"\n")?;
    let run = |api_url_env: Option<&str>, flag: Option<&str>| {
        let mut command = tokio::process::Command::new(chime_binary().expect("binary"));
        command
            .current_dir(&dir)
            .env_remove("CHIME_CONFIG")
            .env_remove("CHIME_API_URL")
            .env_remove("CHIME_API_TOKEN")
            .args(["submit", "--kind", "noop"]);
        if let Some(url) = api_url_env {
            command.env("CHIME_API_URL", url);
        }
        if let Some(url) = flag {
            command.args(["--api-url", url]);
        }
        command.output()
    };
    // chime.toml alone: its (wrong) address is used.
    let from_file = run(None, None).await?;
    assert!(!from_file.status.success());
    assert!(String::from_utf8_lossy(&from_file.stderr).contains("http://127.0.0.1:9"));
    // The environment beats the file.
    let from_env = run(Some(env.api_url()), None).await?;
    assert!(from_env.status.success(), "{from_env:?}");
    // A flag beats the environment.
    let from_flag = run(Some(env.api_url()), Some("http://127.0.0.1:9")).await?;
    assert!(!from_flag.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await
}

async fn metrics_text(url: &str) -> Result<String> {
    Ok(http().get(url).send().await?.text().await?)
}

/// Metrics whose labels are known at start are there at zero before anything happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_read_zero_before_their_first_event() -> Result<()> {
    let env = TestEnv::new().await?;
    let scheduler_addr = format!("127.0.0.1:{}", chime_tests::free_port()?);
    let worker_addr = format!("127.0.0.1:{}", chime_tests::free_port()?);
    let scheduler = env.spawn_chime(&["scheduler", "--metrics-addr", &scheduler_addr])?;
    let worker = env.spawn_chime(&["worker", "--metrics-addr", &worker_addr])?;
    // Nothing fires and nothing runs: an alert on these must read 0, not "no data".
    for (url, wanted) in [
        (
            format!("http://{scheduler_addr}/metrics"),
            vec![
                r#"chime_fire_lag_seconds_count{worker_group="default"} 0"#,
                r#"chime_scheduler_misfires_total{policy="smart"} 0"#,
                "chime_scheduler_fires_total 0",
            ],
        ),
        (
            format!("http://{worker_addr}/metrics"),
            vec![
                r#"chime_worker_attempts_total{outcome="failed"} 0"#,
                r#"chime_tasks_finished_total{worker_group="default",kind="shell",outcome="failed"} 0"#,
                r#"chime_attempt_duration_seconds_count{worker_group="default",kind="shell"} 0"#,
            ],
        ),
    ] {
        eventually("metrics registered at zero", || async {
            Ok(metrics_text(&url)
                .await
                .is_ok_and(|m| wanted.iter().all(|line| m.contains(line))))
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}; {url} has none of {wanted:?}"))?;
    }
    for mut process in [scheduler, worker] {
        process.kill().await?;
    }
    env.cleanup().await
}

/// A standalone scheduler and worker serve their own `/metrics` (`--metrics-addr`), every
/// metric with its HELP line: after a trigger's fires run, the scheduler's relay shows the fire
/// lag by worker group, the worker its finished tasks by outcome, group and kind, and the
/// scheduler the system gauges (workers online, queue depth and consumers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_scheduler_and_worker_serve_their_own_metrics() -> Result<()> {
    use chime_core::schedule::ScheduleSpec;
    use chime_core::store::{jobs, triggers};
    let env = TestEnv::new().await?;
    let scheduler_addr = format!("127.0.0.1:{}", chime_tests::free_port()?);
    let worker_addr = format!("127.0.0.1:{}", chime_tests::free_port()?);
    jobs::create(
        &env.store,
        jobs::NewJob {
            // A name in any language, with a quote: the label escapes it.
            name: "日报 \"tick\"".into(),
            kind: "noop".into(),
            ..Default::default()
        },
    )
    .await?;
    triggers::create(
        &env.store,
        triggers::NewTrigger {
            group: None,
            name: "every-second".into(),
            job_group: None,
            job: "日报 \"tick\"".into(),
            schedule: ScheduleSpec::Simple {
                interval_ms: 1000,
                repeat_count: 2,
                start_time: None,
                end_time: None,
            },
            calendar: None,
            misfire_policy: None,
            priority: None,
            description: None,
            data: serde_json::Value::Null,
        },
    )
    .await?;
    let _scheduler = env.spawn_chime(&["scheduler", "--metrics-addr", &scheduler_addr])?;
    let _worker = env.spawn_chime(&["worker", "--metrics-addr", &worker_addr])?;
    let dependency_addr = format!("127.0.0.1:{}", chime_tests::free_port()?);
    let _dependency = env.spawn_chime(&["dependency", "--metrics-addr", &dependency_addr])?;
    let topology = chime_core::bus::Topology::new(env.settings.prefix.clone());
    let task = chime_core::store::task_lifecycle::submit(
        &env.store,
        &topology,
        chime_core::model::NewTask {
            kind: "shell".into(),
            spec: serde_json::json!({ "script": "exit 4" }),
            ..Default::default()
        },
    )
    .await?;
    let done = env.wait_terminal(task.id).await?;
    assert_eq!(done.status, TaskStatus::Failed);

    let worker_url = format!("http://{worker_addr}/metrics");
    eventually("the worker's outcome counters", || async {
        Ok(metrics_text(&worker_url).await.is_ok_and(|m| {
            m.contains(r#"chime_tasks_finished_total{worker_group="default",kind="noop",outcome="succeeded"} 3"#)
                && m.contains(r#"chime_tasks_finished_total{worker_group="default",kind="shell",outcome="failed"} 1"#)
        }))
    })
    .await?;
    let worker = metrics_text(&worker_url).await?;
    for name in [
        "chime_tasks_finished_total",
        "chime_worker_attempts_total",
        "chime_attempt_duration_seconds",
    ] {
        assert!(
            worker.contains(&format!("# HELP {name} ")),
            "no HELP for {name}:\n{worker}"
        );
    }
    assert!(
        worker.contains("chime_attempt_duration_seconds_bucket{"),
        "{worker}"
    );

    // Fire lag is recorded by the outbox relay that published the fire, in whichever service.
    let scheduler_url = format!("http://{scheduler_addr}/metrics");
    let dependency_url = format!("http://{dependency_addr}/metrics");
    let fire_lags = || async {
        let mut fires = 0;
        for url in [&scheduler_url, &worker_url, &dependency_url] {
            let text = metrics_text(url).await?;
            fires += text
                .lines()
                .find_map(|l| {
                    l.strip_prefix(r#"chime_fire_lag_seconds_count{worker_group="default"} "#)
                })
                .map_or(0, |n| n.trim().parse::<u64>().unwrap_or(0));
        }
        anyhow::Ok(fires)
    };
    // A job's latest success, for "has not succeeded in 25 h" alerts: after its runs.
    let succeeded_since = |m: &str| {
        m.lines()
            .find_map(|l| {
                l.strip_prefix(
                    r#"chime_job_last_success_timestamp_seconds{job="default.日报 \"tick\""} "#,
                )
            })
            .and_then(|at| at.trim().parse::<f64>().ok())
            .is_some_and(|at| at > 1.7e9)
    };
    eventually("the fire lag of three fires, and the gauges", || async {
        let gauges = metrics_text(&scheduler_url).await.is_ok_and(|m| {
            m.contains(r#"chime_workers_online{worker_group="default"} 1"#)
                && m.contains(r#"chime_queue_consumers{worker_group="default"} 1"#)
                && succeeded_since(&m)
        });
        Ok(gauges && fire_lags().await? == 3)
    })
    .await?;
    let scheduler = metrics_text(&scheduler_url).await?;
    for name in [
        "chime_scheduler_fires_total",
        "chime_service_checkins_total",
        "chime_workers_online",
        "chime_queue_depth",
        "chime_outbox_backlog",
    ] {
        assert!(
            scheduler.contains(&format!("# HELP {name} ")),
            "no HELP for {name}:\n{scheduler}"
        );
    }
    // Tasks finished by job and outcome: counted by the dependency service from their events,
    // every outcome of a job there from the start.
    eventually("the job's finished tasks", || async {
        Ok(metrics_text(&dependency_url).await.is_ok_and(|m| {
            m.contains(
                r#"chime_job_tasks_finished_total{job="default.日报 \"tick\"",outcome="succeeded"} 3"#,
            ) && m.contains(
                r#"chime_job_tasks_finished_total{job="default.日报 \"tick\"",outcome="failed"} 0"#,
            )
        }))
    })
    .await?;
    let both = format!(
        "{scheduler}{}{}",
        metrics_text(&worker_url).await?,
        metrics_text(&dependency_url).await?
    );
    assert!(both.contains("# HELP chime_fire_lag_seconds "), "{both}");
    // The lag is a histogram in seconds, by worker group.
    assert!(
        both.contains(r#"chime_fire_lag_seconds_bucket{worker_group="default",le="600"} "#),
        "{both}"
    );
    env.cleanup().await
}

/// Asking the broker about a queue that does not exist yet (a declared worker group no worker
/// serves, as the gauges and the overview do) closes only that channel: the connection stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_about_a_missing_queue_keeps_the_connection() -> Result<()> {
    let env = TestEnv::new().await?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let topology = chime_core::bus::Topology::new(env.settings.prefix.clone());
    let broker = chime_core::bus::Broker::start(
        env.settings.amqp_url.clone(),
        topology.clone(),
        "test".into(),
        shutdown.clone(),
    );
    eventually("the broker connection", || async { Ok(broker.is_ready()) }).await?;
    let generation = broker.generation();
    for _ in 0..3 {
        let depth = broker
            .queue_depth(&topology.group_queue("nobody-serves-this"))
            .await?;
        assert_eq!(depth, None);
    }
    // Give a reconnection (the old behaviour) time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(broker.is_ready());
    assert_eq!(
        broker.generation(),
        generation,
        "the connection was replaced"
    );
    shutdown.cancel();
    env.cleanup().await
}

/// `CHIME_AMQP_URL` may list a cluster's nodes: with the first one unreachable, the services
/// connect to the next and tasks run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_url_may_list_several_nodes_and_a_dead_one_is_skipped() -> Result<()> {
    let (pg, amqp) = chime_tests::server_urls();
    let dead = chime_tests::amqp_url_at(chime_tests::free_port()?);
    let mut env = TestEnv::with_amqp_url(&pg, &format!("{dead}, {amqp}")).await?;
    env.start(chime_cli::commands::services::Services::ALL)
        .await?;
    let id = env.submit(&["--kind", "noop"]).await?;
    assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Succeeded);
    env.cleanup().await
}

/// Settings no retry can mend end start-up with one clear error: a store URL that is not
/// PostgreSQL's, a broker URL that is not AMQP, credentials the broker refuses. A database that
/// is not there is said once, with its cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_refuses_what_no_retry_can_mend() -> Result<()> {
    let env = TestEnv::new().await?;
    let (_, amqp) = chime_tests::server_urls();
    let user = chime_tests::broker_user();
    let wrong_password = match amqp.split_once('@') {
        Some((_, host)) => format!("amqp://{user}:not-the-password@{host}"),
        None => format!("amqp://{user}:not-the-password@127.0.0.1:5672/%2f"),
    };
    let closed_port = chime_tests::free_port()?;
    let cases = [
        (
            "mysql://root@127.0.0.1:3306/chime".to_string(),
            env.settings.amqp_url.clone(),
            "postgres://",
        ),
        (
            env.settings.database_url.clone(),
            "http://127.0.0.1:5672".to_string(),
            "amqp://",
        ),
        (
            env.settings.database_url.clone(),
            wrong_password,
            "refused the user",
        ),
        (
            format!("postgres://postgres@127.0.0.1:{closed_port}/chime"),
            env.settings.amqp_url.clone(),
            "Connection refused",
        ),
    ];
    for (database_url, amqp_url, expected) in cases {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::process::Command::new(chime_binary()?)
                .arg("scheduler")
                .env("CHIME_DATABASE_URL", &database_url)
                .env("CHIME_AMQP_URL", &amqp_url)
                .env("CHIME_PREFIX", &env.settings.prefix)
                .env("CHIME_CONFIG", "/nonexistent/chime.toml")
                .env("RUST_LOG", "off")
                .env_remove("DATABASE_URL")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .with_context(|| format!("{amqp_url} / {database_url}: still running after 60 s"))??;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{database_url} {amqp_url}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains(expected), "{expected}: {stderr}");
        assert_eq!(stderr.matches(expected).count(), 1, "said once: {stderr}");
        assert!(!stderr.contains("not-the-password"), "{stderr}");
    }
    env.cleanup().await
}

/// `chime migrate` refuses a URL that is not PostgreSQL's as the services do: the driver would
/// read `mysql://` to the PostgreSQL port as PostgreSQL's and create the database there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_refuses_a_url_that_is_not_postgresql() -> Result<()> {
    let env = TestEnv::new().await?;
    let (pg, _) = chime_tests::server_urls();
    let database = format!("chime_mysql_{}", env.settings.prefix);
    let host = pg
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or(rest))
        .unwrap_or("127.0.0.1:5432");
    for scheme in ["mysql", "sqlite", "redis"] {
        let url = format!("{scheme}://{host}/{database}");
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::process::Command::new(chime_binary()?)
                .arg("migrate")
                .env("CHIME_DATABASE_URL", &url)
                .env("CHIME_CONFIG", "/nonexistent/chime.toml")
                .env("RUST_LOG", "off")
                .env_remove("DATABASE_URL")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .with_context(|| format!("migrate {url}: still running after 60 s"))??;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{url}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains("is not a PostgreSQL URL"), "{stderr}");
    }
    let made: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&database)
            .fetch_one(env.store.pool())
            .await?;
    assert!(!made, "no database {database} was made");
    env.cleanup().await
}

/// `chime up --no-worker` runs the API, a scheduler and a dependency service, and no worker: a
/// task submitted to it waits, and runs once a worker starts elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_without_its_worker_runs_every_other_service() -> Result<()> {
    let mut env = TestEnv::new().await?;
    let mut up = env.spawn_chime(&[
        "up",
        "--no-worker",
        "--api-addr",
        env.settings.api_addr.as_str(),
    ])?;
    let ready = format!("{}/readyz", env.api_url());
    eventually("chime up --no-worker to be ready", || async {
        Ok(http().get(&ready).send().await?.status().is_success())
    })
    .await?;
    let id = env.submit(&["--kind", "noop"]).await?;
    eventually("every service but a worker to check in", || async {
        let kinds: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT kind FROM service_instances ORDER BY kind")
                .fetch_all(env.store.pool())
                .await?;
        Ok(kinds == ["api", "dependency", "scheduler"])
    })
    .await?;
    let workers: i64 = sqlx::query_scalar("SELECT count(*) FROM workers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(workers, 0, "no worker");
    assert_ne!(env.task(id).await?.status, TaskStatus::Succeeded);
    env.start(chime_cli::commands::services::Services::WORKER)
        .await?;
    assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Succeeded);
    up.kill().await?;
    env.cleanup().await
}
