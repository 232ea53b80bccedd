//! `chime bench lag --rate R --seconds S [--schedulers K]`: R fires a second for S seconds at
//! known times (one-shot triggers spread evenly); lateness of each task message's publish
//! (broker confirm, then marked in PostgreSQL) against its scheduled time: p50, p99, max.

use chime_core::config::Settings;

use crate::installation::{BenchResult, Installation};

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Fires per second.
    pub rate: i64,
    /// Seconds of load.
    pub seconds: i64,
    /// Scheduler instances.
    pub schedulers: usize,
    /// Lateness percentiles, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Worst.
    pub max_ms: f64,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench lag rate={} seconds={} schedulers={} fires={} p50_ms={:.1} p99_ms={:.1} max_ms={:.1}",
            self.rate,
            self.seconds,
            self.schedulers,
            self.rate * self.seconds,
            self.p50_ms,
            self.p99_ms,
            self.max_ms
        )
    }
}

/// Runs the benchmark in its own database (`chime_bench_lag`), dropped and recreated.
pub async fn run(
    settings: &Settings,
    rate: i64,
    seconds: i64,
    schedulers: usize,
) -> BenchResult<Figures> {
    let mut installation = Installation::create(settings, "lag").await?;
    let store = installation.store.clone();
    let fires = rate * seconds;
    // Evenly spread, starting a few seconds ahead.
    sqlx::query(
        r#"
        WITH job AS (
            INSERT INTO jobs (name, kind) VALUES ('bench', 'noop') RETURNING id
        ), origin AS (SELECT date_trunc('second', now()) + interval '4 s' AS at)
        INSERT INTO triggers (name, job_id, schedule, start_time, next_fire_time)
        SELECT 't' || n, job.id,
               jsonb_build_object('kind', 'simple', 'interval_ms', 0, 'repeat_count', 0,
                                  'start_time', to_jsonb(fire.at)),
               fire.at, fire.at
        FROM job, origin, generate_series(0, $1 - 1) n,
             LATERAL (SELECT origin.at + make_interval(secs => n::float8 / $2) AS at) fire
        "#,
    )
    .bind(fires)
    .bind(rate as f64)
    .execute(store.pool())
    .await?;
    sqlx::query("VACUUM ANALYZE triggers")
        .execute(store.pool())
        .await?;
    installation.start_schedulers(schedulers).await?;
    installation.wait_published(fires).await?;
    let (p50, p99, max): (f64, f64, f64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness),
                percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness),
                max(lateness)
         FROM (SELECT EXTRACT(EPOCH FROM published_at - publish_at)::float8 * 1000 AS lateness
               FROM outbox WHERE exchange LIKE '%.tasks') l",
    )
    .fetch_one(store.pool())
    .await?;
    installation.finish().await?;
    Ok(Figures {
        rate,
        seconds,
        schedulers,
        p50_ms: p50,
        p99_ms: p99,
        max_ms: max,
    })
}
