//! `chime bench deps --data-times N [--rate R]`: job `down` depends on job `up` (window `same`);
//! `up` runs for N data times at R per second; measured for each data time from `up`'s task
//! succeeding (its row's finish time) to `down`'s task message being confirmed by the broker
//! (its outbox row's publish time), both on the database's clock: p50, p99, max.

use std::time::{Duration, Instant};

use chime_core::config::Settings;
use chime_core::store::dependencies::{self, NewDependency};
use chime_core::store::jobs::{self, NewJob};
use chime_core::store::task_lifecycle;

use crate::installation::{BenchResult, Installation};

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Data times.
    pub data_times: usize,
    /// Upstream runs started per second.
    pub rate: f64,
    /// Median upstream-success → downstream-publish, milliseconds.
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
            "bench deps data_times={} rate={:.0} p50_ms={:.1} p99_ms={:.1} max_ms={:.1}",
            self.data_times, self.rate, self.p50_ms, self.p99_ms, self.max_ms
        )
    }
}

/// Runs the benchmark in its own database, dropped and recreated.
pub async fn run(settings: &Settings, data_times: usize, rate: f64) -> BenchResult<Figures> {
    let mut installation = Installation::create(settings, "deps").await?;
    installation.start_workers(1, 64).await?;
    installation.start_dependency_services(1).await?;
    let store = installation.node_store();
    let topology = chime_core::bus::Topology::new(installation.settings().prefix.clone());
    for name in ["up", "down"] {
        jobs::create(
            &store,
            NewJob {
                name: name.into(),
                kind: "noop".into(),
                ..NewJob::default()
            },
        )
        .await?;
    }
    dependencies::add(
        &store,
        "default",
        "down",
        NewDependency {
            upstream: "up".into(),
            upstream_group: None,
            window: None,
            on_upstream_failure: None,
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let base: jiff::Timestamp = "2026-01-01T00:00:00Z".parse()?;
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let started = Instant::now();
    for n in 0..data_times {
        let at = started + interval * u32::try_from(n)?;
        tokio::time::sleep_until(at.into()).await;
        let data_time = base.checked_add(jiff::SignedDuration::from_mins(i64::try_from(n)?))?;
        task_lifecycle::run_job_now(
            &store,
            &topology,
            "default",
            "up",
            serde_json::json!({}),
            Some(data_time),
            None,
        )
        .await?;
    }
    let rate = data_times as f64 / started.elapsed().as_secs_f64();
    loop {
        let published: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks d JOIN jobs j ON j.id = d.job_id
             WHERE j.name = 'down' AND d.status = 'succeeded'",
        )
        .fetch_one(store.pool())
        .await?;
        if published as usize >= data_times {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (p50_ms, p99_ms, max_ms): (f64, f64, f64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms),
                percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), max(ms)
         FROM (SELECT extract(epoch FROM o.published_at - u.finished_at)::float8 * 1000 AS ms
               FROM tasks u JOIN jobs ju ON ju.id = u.job_id AND ju.name = 'up'
               JOIN tasks d ON d.data_time = u.data_time
               JOIN jobs jd ON jd.id = d.job_id AND jd.name = 'down'
               JOIN outbox o ON o.exchange LIKE '%.tasks'
                            AND o.body->>'task_id' = d.id::text) AS latency",
    )
    .fetch_one(store.pool())
    .await?;
    installation.finish().await?;
    Ok(Figures {
        data_times,
        rate,
        p50_ms,
        p99_ms,
        max_ms,
    })
}
