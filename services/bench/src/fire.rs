//! `chime bench fire --triggers N --schedulers K [--idle-triggers M]`: N one-shot triggers made due
//! at one instant while K scheduler instances sit idle; fires per second from that instant until
//! every task is published (confirmed by the broker), by the database's clock. Nothing is acquired
//! ahead of the instant, so the lookahead window does not flatter the figure. With M idle triggers
//! (due in a year) in the store beside them, it is the scale benchmark.

use std::time::Duration;

use chime_core::config::Settings;

use crate::installation::{BenchResult, Installation};

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Triggers fired.
    pub triggers: i64,
    /// Scheduler instances.
    pub schedulers: usize,
    /// Seconds from the due instant to the last publish.
    pub seconds: f64,
    /// Idle triggers in the store beside them.
    pub idle: i64,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench fire triggers={} idle_triggers={} schedulers={} fires_per_s={:.0} seconds={:.3}",
            self.triggers,
            self.idle,
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
    idle: i64,
) -> BenchResult<Figures> {
    let mut installation = Installation::create(settings, "fire").await?;
    let store = installation.store.clone();
    if idle > 0 {
        // A year away: never due during the run, always in the index.
        one_shot_triggers(&store, "idle", idle, 365).await?;
    }
    // Far in the future at first: the instances start idle.
    one_shot_triggers(&store, "t", triggers, 1).await?;
    sqlx::query("VACUUM ANALYZE triggers")
        .execute(store.pool())
        .await?;
    installation.start_schedulers(schedulers).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // All due at once, now; NOTIFY wakes the instances (as a trigger created or resumed does).
    let mut tx = store.pool().begin().await?;
    let due: f64 = sqlx::query_scalar(
        "WITH moved AS (
             UPDATE triggers SET next_fire_time = now(), start_time = now(),
                    schedule = schedule || jsonb_build_object('start_time', to_jsonb(now()))
             WHERE name LIKE 't%'
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
    installation.wait_published(triggers).await?;
    let last_published: Option<f64> = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM max(published_at))::float8 FROM outbox
         WHERE exchange LIKE '%.tasks'",
    )
    .fetch_one(store.pool())
    .await?;
    let last_published = last_published.unwrap_or(due);
    installation.finish().await?;
    Ok(Figures {
        triggers,
        schedulers,
        seconds: last_published - due,
        idle,
    })
}

/// `count` one-shot triggers named `<prefix><n>` on a new noop job named `prefix`, due in
/// `days` days.
async fn one_shot_triggers(
    store: &chime_core::Store,
    prefix: &str,
    count: i64,
    days: i32,
) -> BenchResult<()> {
    sqlx::query(
        r#"
        WITH job AS (
            INSERT INTO jobs (name, kind) VALUES ($1, 'noop') RETURNING id
        ), later AS (SELECT now() + make_interval(days => $3) AS at)
        INSERT INTO triggers (name, job_id, schedule, start_time, next_fire_time)
        SELECT $1 || n, job.id,
               jsonb_build_object('kind', 'simple', 'interval_ms', 0, 'repeat_count', 0),
               later.at, later.at
        FROM job, later, generate_series(1, $2) n
        "#,
    )
    .bind(prefix)
    .bind(count)
    .bind(days)
    .execute(store.pool())
    .await?;
    Ok(())
}
