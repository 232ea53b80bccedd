//! `chime bench recovery --tasks N`: a worker process running N `requests_recovery` tasks is
//! killed with SIGKILL; measured on the database's clock from the kill to each task's re-run
//! attempt starting on another worker (p50, max), and to the dead worker being declared offline.
//! One scheduler instance (which recovers) and the second worker run in this process. The kill
//! comes once the scheduler has run for over 20 s, as in a running cluster, or with `--fresh`
//! 5 s after it started, as in a rolling restart.

use std::time::Duration;

use chime_core::config::Settings;
use chime_core::model::NewTask;
use chime_core::store::task_lifecycle;

use crate::installation::{BenchResult, Installation};

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Tasks the killed worker ran.
    pub tasks: usize,
    /// Whether the scheduler had started 5 s before the kill.
    pub fresh: bool,
    /// Kill to the worker declared offline, milliseconds.
    pub detect_ms: f64,
    /// Kill to re-run started: median, milliseconds.
    pub p50_ms: f64,
    /// Kill to re-run started: the slowest task.
    pub max_ms: f64,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench recovery tasks={} fresh={} detect_ms={:.0} rerun_started_p50_ms={:.0} rerun_started_max_ms={:.0}",
            self.tasks, self.fresh, self.detect_ms, self.p50_ms, self.max_ms
        )
    }
}

/// Runs the benchmark in its own database, dropped and recreated.
pub async fn run(settings: &Settings, tasks: usize, fresh: bool) -> BenchResult<Figures> {
    let mut installation = Installation::create(settings, "recovery").await?;
    if !fresh {
        installation.start_schedulers(1).await?;
    }
    let store = installation.store.clone();
    let topology = chime_core::bus::Topology::new(installation.settings().prefix.clone());
    let mut victim = spawn_worker(installation.settings(), tasks)?;
    let result = measure(
        &mut installation,
        &store,
        &topology,
        &mut victim,
        tasks,
        fresh,
    )
    .await;
    let _ = victim.kill().await;
    // Attempt 1's commands died with their worker; nothing else of theirs is left.
    installation.finish().await?;
    result
}

async fn measure(
    installation: &mut Installation,
    store: &chime_core::Store,
    topology: &chime_core::bus::Topology,
    victim: &mut tokio::process::Child,
    tasks: usize,
    fresh: bool,
) -> BenchResult<Figures> {
    let started = tokio::time::Instant::now();
    wait_for(
        store,
        "SELECT count(*) FROM workers WHERE status = 'online'",
        1,
    )
    .await?;
    let batch = (0..tasks)
        .map(|_| NewTask {
            kind: "shell".into(),
            spec: serde_json::json!({
                "command": r#"if [ "$CHIME_ATTEMPT" = 1 ]; then sleep 600; fi"#
            }),
            requests_recovery: Some(true),
            ..NewTask::default()
        })
        .collect();
    task_lifecycle::submit_many(store, topology, batch).await?;
    wait_for(
        store,
        "SELECT count(*) FROM tasks WHERE status = 'running'",
        tasks as i64,
    )
    .await?;
    // The survivor is up (and idle) before the kill.
    installation.start_workers(1, tasks as u16).await?;
    wait_for(
        store,
        "SELECT count(*) FROM workers WHERE status = 'online'",
        2,
    )
    .await?;
    if fresh {
        installation.start_schedulers(1).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
    } else {
        tokio::time::sleep_until(started + Duration::from_secs(21)).await;
    }
    let pid = victim.id().ok_or("the worker process has exited")?;
    let killed_at: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(store.pool())
        .await?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid)?),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    let _ = victim.wait().await;
    wait_for(
        store,
        // A re-run attempt has started once its task is at attempt 2 with a start time (its
        // attempt row comes only when it prints or ends).
        "SELECT count(*) FROM tasks WHERE attempt = 2 AND started_at IS NOT NULL",
        tasks as i64,
    )
    .await?;
    let (p50_ms, max_ms, detect_ms): (f64, f64, f64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), max(ms),
                (SELECT extract(epoch FROM min(stopped_at) - $1)::float8 * 1000 FROM workers
                 WHERE stopped_at IS NOT NULL)
         FROM (SELECT extract(epoch FROM started_at - $1)::float8 * 1000 AS ms
               FROM tasks WHERE attempt = 2) AS a",
    )
    .bind(killed_at)
    .fetch_one(store.pool())
    .await?;
    Ok(Figures {
        tasks,
        fresh,
        detect_ms,
        p50_ms,
        max_ms,
    })
}

/// The worker to be killed: this same binary, `chime worker`, as a process of its own.
fn spawn_worker(settings: &Settings, concurrency: usize) -> BenchResult<tokio::process::Child> {
    let concurrency = concurrency.to_string();
    let args = ["worker", "--concurrency", concurrency.as_str()];
    Ok(
        crate::installation::chime_process(settings, &std::env::current_exe()?, &args)
            .env("CHIME_DB_POOL_SIZE", "4")
            .spawn()?,
    )
}

/// Waits (up to two minutes) until `count_sql` counts at least `n`.
async fn wait_for(store: &chime_core::Store, count_sql: &'static str, n: i64) -> BenchResult<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let count: i64 = sqlx::query_scalar(count_sql)
            .fetch_one(store.pool())
            .await?;
        if count >= n {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("timed out waiting for {n} from {count_sql}").into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
