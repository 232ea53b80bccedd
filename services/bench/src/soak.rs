//! `chime bench soak --rate R --seconds S [--triggers T] [--warmup W]`: a default `chime up`
//! (started by the benchmark, on its own database and prefix) under a steady load for S seconds:
//! R noop tasks a second through `POST /api/v1/tasks/batch` (a batch every 100 ms) and T
//! triggers that fire every second. Its resident memory is sampled every 5 s beside the tasks in
//! the store; after the first W seconds (warm-up: pools, caches and the allocator's arenas reach
//! their size) the slope of a least-squares line through the samples is printed in MB per
//! million tasks. A process that keeps nothing per task stays flat (a slope near 0); a leak of
//! 25 bytes a task shows as about 24. Its memory once the load has stopped, every task has ended
//! and it has been idle for 10 s is printed too: what it keeps, not what it used.
//!
//! Nothing scrapes the service's `/metrics` during the run (a scrape does the metrics recorder's
//! upkeep): the soak sees the process as an installation nobody scrapes does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chime_core::config::Settings;

use crate::installation::{BenchResult, Installation};
use crate::submit::{peak_rss_kb, rss_kb, spawn_up_on_free_port, stop, wait_ready};

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Figures {
    /// Ad-hoc tasks submitted per second.
    pub rate: usize,
    /// Seconds of load.
    pub seconds: u64,
    /// Triggers firing each second.
    pub triggers: usize,
    /// Tasks made in all (ad-hoc and fired), every one ended by the end.
    pub tasks: i64,
    /// Resident memory at the end of the warm-up, MB.
    pub warm_mb: f64,
    /// Resident memory when the load stopped, MB.
    pub end_mb: f64,
    /// Resident memory after 10 s idle, MB.
    pub idle_mb: f64,
    /// Peak resident memory, MB.
    pub peak_mb: f64,
    /// The least-squares slope of memory against tasks after the warm-up, MB per million tasks.
    pub slope_mb_per_million: f64,
    /// Samples the slope was fitted to.
    pub samples: usize,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench soak rate={} seconds={} triggers={} tasks={} warm_mb={:.1} end_mb={:.1} idle_mb={:.1} peak_mb={:.1} slope_mb_per_million={:.2} samples={}",
            self.rate,
            self.seconds,
            self.triggers,
            self.tasks,
            self.warm_mb,
            self.end_mb,
            self.idle_mb,
            self.peak_mb,
            self.slope_mb_per_million,
            self.samples
        )
    }
}

/// How often memory and tasks are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// Runs the soak against a `chime up` of this binary (or `CHIME_BENCH_UP_BIN`) on a fresh
/// installation.
pub async fn run(
    settings: &Settings,
    rate: usize,
    seconds: u64,
    triggers: usize,
    warmup: u64,
) -> BenchResult<Figures> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let installation = Installation::create(settings, "soak").await?;
    let (base, up) = spawn_up_on_free_port(installation.settings())?;
    let load = Load {
        rate,
        seconds,
        triggers,
        warmup,
    };
    let result = soak(&installation, &base, &up, load).await;
    stop(up).await;
    installation.finish().await?;
    result
}

/// The load a soak applies.
#[derive(Debug, Clone, Copy)]
struct Load {
    rate: usize,
    seconds: u64,
    triggers: usize,
    warmup: u64,
}

async fn soak(
    installation: &Installation,
    base: &str,
    up: &tokio::process::Child,
    load: Load,
) -> BenchResult<Figures> {
    let pid = up.id().ok_or("chime up ended before it was measured")?;
    let http = reqwest::Client::new();
    wait_ready(&http, base).await?;
    add_triggers(installation, load.triggers).await?;

    let length = Duration::from_secs(load.seconds);
    let submitting = tokio::spawn(submit_steadily(
        http.clone(),
        format!("{base}/api/v1/tasks/batch"),
        load.rate,
        length,
    ));
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut warm_kb = None;
    let mut sampler = tokio::time::interval(SAMPLE_EVERY);
    sampler.tick().await;
    while started.elapsed() < length {
        sampler.tick().await;
        let kb = rss_kb(pid);
        if started.elapsed() < Duration::from_secs(load.warmup) {
            continue;
        }
        warm_kb.get_or_insert(kb);
        samples.push((made(installation).await? as f64, kb as f64 / 1024.0));
    }
    let sent = submitting.await??;
    let end_kb = rss_kb(pid);
    // Stop the triggers (each fires a second and more ahead), let what was made end, then idle.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        sqlx::query(
            "UPDATE triggers SET state = 'paused'
             WHERE state = 'waiting' AND job_id IN (SELECT id FROM jobs WHERE name = 'soak')",
        )
        .execute(installation.store.pool())
        .await?;
        let left = unfinished(installation).await?;
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("{left} tasks had not ended 120 s after the load stopped").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let tasks = made(installation).await?;
    if tasks < sent as i64 {
        return Err(format!("{sent} tasks were accepted, the store holds {tasks}").into());
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle_kb = rss_kb(pid);
    Ok(Figures {
        rate: load.rate,
        seconds: load.seconds,
        triggers: load.triggers,
        tasks,
        warm_mb: warm_kb.unwrap_or(end_kb) as f64 / 1024.0,
        end_mb: end_kb as f64 / 1024.0,
        idle_mb: idle_kb as f64 / 1024.0,
        peak_mb: peak_rss_kb(pid) as f64 / 1024.0,
        slope_mb_per_million: slope(&samples) * 1e6,
        samples: samples.len(),
    })
}

/// `count` triggers of one noop job, each firing every second from the next second on.
async fn add_triggers(installation: &Installation, count: usize) -> BenchResult<()> {
    if count == 0 {
        return Ok(());
    }
    sqlx::query(
        r#"
        WITH job AS (
            INSERT INTO jobs (name, kind) VALUES ('soak', 'noop') RETURNING id
        ), origin AS (SELECT date_trunc('second', now()) + interval '1 s' AS at)
        INSERT INTO triggers (name, job_id, schedule, start_time, next_fire_time)
        SELECT 'every-second-' || n, job.id,
               jsonb_build_object('kind', 'simple', 'interval_ms', 1000, 'repeat_count', -1,
                                  'start_time', to_jsonb(origin.at)),
               origin.at, origin.at
        FROM job, origin, generate_series(1, $1) n
        "#,
    )
    .bind(count as i64)
    .execute(installation.store.pool())
    .await?;
    Ok(())
}

/// Posts `rate / 10` noop tasks every 100 ms for `length`, up to 4 requests in flight (a slow
/// answer delays no later batch); returns how many were accepted.
async fn submit_steadily(
    http: reqwest::Client,
    url: String,
    rate: usize,
    length: Duration,
) -> BenchResult<usize> {
    let per_tick = rate.div_ceil(10);
    let body = Arc::new(serde_json::json!({
        "tasks": vec![serde_json::json!({"kind": "noop"}); per_tick]
    }));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(4));
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let started = Instant::now();
    let mut requests = tokio::task::JoinSet::new();
    while started.elapsed() < length {
        ticks.tick().await;
        let permit = in_flight.clone().acquire_owned().await?;
        let (http, url, body) = (http.clone(), url.clone(), body.clone());
        requests.spawn(async move {
            let _permit = permit;
            let response = http.post(&url).json(&*body).send().await?;
            if !response.status().is_success() {
                return Err(format!("POST {url}: HTTP {}", response.status()).into());
            }
            response.bytes().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(per_tick)
        });
    }
    let mut sent = 0;
    while let Some(done) = requests.join_next().await {
        sent += done??;
    }
    Ok(sent)
}

/// Tasks in the store, counted there rather than from `/metrics` (see the module's comment).
async fn made(installation: &Installation) -> BenchResult<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(installation.store.pool())
        .await?)
}

/// Tasks that have not ended.
async fn unfinished(installation: &Installation) -> BenchResult<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM tasks WHERE status IN ('waiting', 'ready', 'running', 'retrying')",
    )
    .fetch_one(installation.store.pool())
    .await?)
}

/// The least-squares slope of y against x (0 with fewer than two distinct x).
fn slope(points: &[(f64, f64)]) -> f64 {
    if points.len() < 2 {
        return 0.0;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

#[cfg(test)]
mod tests {
    use super::slope;

    #[test]
    fn the_slope_of_a_line_is_its_gradient_and_of_a_flat_one_zero() {
        let line: Vec<_> = (0..10).map(|i| (i as f64, 3.0 + 0.5 * i as f64)).collect();
        assert!((slope(&line) - 0.5).abs() < 1e-12);
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 5.0)]), 0.0);
        assert_eq!(slope(&[(1.0, 2.0)]), 0.0);
    }
}
