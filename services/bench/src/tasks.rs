//! `chime bench tasks --count N --concurrency C [--workers W]`: N ad-hoc noop tasks, submitted in
//! batches as fast as the store takes them, run by W workers of C slots each; measured from each
//! task's creation to its `succeeded` row (both on the database's clock), with every state change
//! committed on the way (task, attempt, outcome, event).

use std::time::Instant;

use chime_core::config::Settings;
use chime_core::model::NewTask;
use chime_core::store::task_lifecycle;

use crate::installation::{BenchResult, Installation};

/// How many tasks one submission statement carries.
const SUBMIT_BATCH: usize = 500;

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Figures {
    /// Tasks run.
    pub count: usize,
    /// Workers.
    pub workers: usize,
    /// Slots per worker.
    pub concurrency: u16,
    /// Tasks per second, first submission to last success.
    pub tasks_per_s: f64,
    /// Median submit-to-succeeded latency, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// How long submitting took, seconds (the submitter is one loop in this process).
    pub submit_s: f64,
    /// What PostgreSQL did per task, from submit to the services' stop.
    pub postgres: String,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench tasks count={} workers={} concurrency={} tasks_per_s={:.0} p50_ms={:.1} p99_ms={:.1} submit_s={:.2}",
            self.count,
            self.workers,
            self.concurrency,
            self.tasks_per_s,
            self.p50_ms,
            self.p99_ms,
            self.submit_s
        ) + "\nbench tasks "
            + &self.postgres
    }
}

/// Runs the benchmark in its own database, dropped and recreated.
pub async fn run(
    settings: &Settings,
    count: usize,
    concurrency: u16,
    workers: usize,
) -> BenchResult<Figures> {
    let mut installation = Installation::create(settings, "tasks").await?;
    installation.start_workers(workers, concurrency).await?;
    let store = installation.node_store();
    let topology = chime_core::bus::Topology::new(installation.settings().prefix.clone());
    // Let the workers register and start consuming before the clock starts.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    let before = installation.activity().await?;
    let started = Instant::now();
    let mut left = count;
    while left > 0 {
        let n = left.min(SUBMIT_BATCH);
        let batch = (0..n)
            .map(|_| NewTask {
                kind: "noop".into(),
                ..NewTask::default()
            })
            .collect();
        task_lifecycle::submit_many(&store, &topology, batch).await?;
        left -= n;
    }
    let submit_s = started.elapsed().as_secs_f64();
    // Done when no task is left unfinished (an index probe, so watching costs the run little).
    loop {
        let unfinished: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM tasks WHERE status IN ('ready', 'running', 'retrying'))",
        )
        .fetch_one(store.pool())
        .await?;
        if !unfinished {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let succeeded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tasks WHERE status = 'succeeded'")
            .fetch_one(store.pool())
            .await?;
    if succeeded as usize != count {
        return Err(format!("{succeeded} of {count} tasks succeeded").into());
    }
    let (span_s, p50_ms, p99_ms): (f64, f64, f64) = sqlx::query_as(
        "SELECT extract(epoch FROM max(finished_at) - min(created_at))::float8,
                percentile_cont(0.5) WITHIN GROUP (ORDER BY latency),
                percentile_cont(0.99) WITHIN GROUP (ORDER BY latency)
         FROM (SELECT created_at, finished_at,
                      extract(epoch FROM finished_at - created_at)::float8 * 1000 AS latency
               FROM tasks) AS t",
    )
    .fetch_one(store.pool())
    .await?;
    installation.stop().await;
    let postgres = installation
        .activity()
        .await?
        .per_task_since(&before, count);
    installation.finish().await?;
    Ok(Figures {
        count,
        workers,
        concurrency,
        tasks_per_s: count as f64 / span_s.max(1e-9),
        p50_ms,
        p99_ms,
        submit_s,
        postgres,
    })
}
