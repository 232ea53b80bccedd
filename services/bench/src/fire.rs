//! `chime bench fire --triggers N --schedulers K`: N one-shot triggers made due at one instant
//! while K scheduler instances sit idle; fires per second from that instant until every task is
//! published (confirmed by the broker), by the database's clock. Nothing is acquired ahead of the
//! instant, so the lookahead window does not flatter the figure.

use std::time::Duration;

use chime_core::config::Settings;
use chime_core::{Node, Store};
use chime_scheduler::SchedulerSettings;
use tokio_util::sync::CancellationToken;

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Triggers fired.
    pub triggers: i64,
    /// Scheduler instances.
    pub schedulers: usize,
    /// Seconds from the due instant to the last publish.
    pub seconds: f64,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench fire triggers={} schedulers={} fires_per_s={:.0} seconds={:.3}",
            self.triggers,
            self.schedulers,
            self.triggers as f64 / self.seconds.max(1e-9),
            self.seconds
        )
    }
}

/// Runs the benchmark in its own database (`<database>_bench_fire`) and AMQP prefix, which it
/// drops and recreates.
pub async fn run(
    settings: &Settings,
    triggers: i64,
    schedulers: usize,
) -> Result<Figures, Box<dyn std::error::Error + Send + Sync>> {
    let base = settings
        .database_url
        .rsplit_once('/')
        .map_or(settings.database_url.as_str(), |(server, _)| server);
    let database = "chime_bench_fire";
    let admin = sqlx::PgPool::connect(&format!("{base}/postgres")).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
    )))
    .execute(&admin)
    .await?;
    let settings = Settings {
        database_url: format!("{base}/{database}"),
        prefix: "chime-bench-fire".into(),
        ..settings.clone()
    };
    let store = Store::connect(&settings.database_url, 4).await?;
    // Far in the future at first: the instances start idle.
    sqlx::query(
        r#"
        WITH job AS (
            INSERT INTO jobs (name, kind) VALUES ('bench', 'noop') RETURNING id
        ), later AS (SELECT now() + interval '1 day' AS at)
        INSERT INTO triggers (name, job_id, schedule, start_time, next_fire_time)
        SELECT 't' || n, job.id,
               jsonb_build_object('kind', 'simple', 'interval_ms', 0, 'repeat_count', 0),
               later.at, later.at
        FROM job, later, generate_series(1, $1) n
        "#,
    )
    .bind(triggers)
    .execute(store.pool())
    .await?;
    sqlx::query("VACUUM ANALYZE triggers")
        .execute(store.pool())
        .await?;
    let shutdown = CancellationToken::new();
    let mut nodes = Vec::new();
    for _ in 0..schedulers {
        let node = std::sync::Arc::new(Node::start(settings.clone(), "bench").await?);
        let (n, stop) = (node.clone(), shutdown.clone());
        tokio::spawn(async move {
            let _ = chime_scheduler::run(&n, SchedulerSettings::default(), stop).await;
        });
        nodes.push(node);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // All due at once, now; NOTIFY wakes the instances (as a trigger created or resumed does).
    let mut tx = store.pool().begin().await?;
    let due: f64 = sqlx::query_scalar(
        "WITH moved AS (
             UPDATE triggers SET next_fire_time = now(), start_time = now(),
                    schedule = schedule || jsonb_build_object('start_time', to_jsonb(now()))
             RETURNING 1)
         SELECT EXTRACT(EPOCH FROM now())::float8 FROM moved LIMIT 1",
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(store.triggers_channel())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    let last_published: f64 = loop {
        let (published, last): (i64, Option<f64>) = sqlx::query_as(
            "SELECT count(*), EXTRACT(EPOCH FROM max(published_at))::float8
             FROM outbox WHERE published_at IS NOT NULL AND exchange LIKE '%.tasks'",
        )
        .fetch_one(store.pool())
        .await?;
        if published >= triggers {
            break last.unwrap_or(due);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for node in nodes {
        if let Ok(node) = std::sync::Arc::try_unwrap(node) {
            node.stopped().await;
        }
    }
    store.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
    )))
    .execute(&admin)
    .await?;
    Ok(Figures {
        triggers,
        schedulers,
        seconds: last_published - due,
    })
}
