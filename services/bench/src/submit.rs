//! `chime bench submit --via amqp|http|batch --count N [--clients C]`: N noop submissions through
//! one front door of a default `chime up` (started by the benchmark, on its own database and
//! prefix), measured three times from just before the first submission (the AMQP door's
//! connection and channel are open by then, as a publisher's are): accepted (every publish
//! confirmed by the broker, or every HTTP answer received), recorded (the service counted every
//! submission committed; for batches, each answered after its commit, the same as accepted) and
//! end to end (the last task `succeeded`). End to end is on the database's clock, as `chime
//! bench tasks` measures, so a poll's interval adds nothing to it.
//!
//! - `amqp`: published with ids to `<prefix>.submit` from one channel with confirms, at most
//!   1,000 unconfirmed at a time; the same ids are then published again, and the run checks
//!   that they made no task.
//! - `http`: single `POST /api/v1/tasks` requests from C keep-alive clients.
//! - `batch`: `POST /api/v1/tasks/batch` with 1,000 submissions each, from C clients.
//!
//! `CHIME_BENCH_UP_BIN=PATH` starts another build's `chime up` instead of this binary's, to
//! measure an earlier commit through the same doors.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use chime_core::bus::Topology;
use chime_core::bus::publish::{QueuedPublish, queue_publish};
use chime_core::config::Settings;
use chime_core::model::NewTask;
use chime_core::model::message::SubmitMessage;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use uuid::Uuid;

use crate::installation::{BenchResult, Installation};

/// Which door the submissions come through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `<prefix>.submit`, any AMQP client's way.
    Amqp,
    /// Single `POST /api/v1/tasks`.
    Http,
    /// `POST /api/v1/tasks/batch`.
    Batch,
}

impl std::str::FromStr for Via {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "amqp" => Ok(Self::Amqp),
            "http" => Ok(Self::Http),
            "batch" => Ok(Self::Batch),
            _ => Err(format!("{s:?}: expected amqp, http or batch")),
        }
    }
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Amqp => "amqp",
            Self::Http => "http",
            Self::Batch => "batch",
        })
    }
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Figures {
    /// The door.
    pub via: Via,
    /// Submissions.
    pub count: usize,
    /// Concurrent HTTP clients (1 for AMQP).
    pub clients: usize,
    /// Submissions per second, until the last was accepted.
    pub accepted_per_s: f64,
    /// Submissions per second, until the last was a task in the store.
    pub recorded_per_s: f64,
    /// Tasks per second, first submission to last success.
    pub tasks_per_s: f64,
    /// Tasks made by publishing every id again (AMQP; should be 0).
    pub again_new_tasks: Option<i64>,
    /// Peak resident memory of the `chime up` process, kB.
    pub up_peak_rss_kb: u64,
    /// Submissions per commit, on average (AMQP and single HTTP requests; from `/metrics`).
    pub mean_batch: Option<f64>,
    /// The share of the tasks the worker ran itself from the submissions it took, with no task
    /// message (AMQP and single HTTP requests; from `/metrics`).
    pub taken: Option<f64>,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        let again = self
            .again_new_tasks
            .map(|n| format!(" again_new_tasks={n}"))
            .unwrap_or_default();
        let batch = self
            .mean_batch
            .map(|n| format!(" mean_batch={n:.1}"))
            .unwrap_or_default();
        let taken = self
            .taken
            .map(|n| format!(" taken={n:.2}"))
            .unwrap_or_default();
        format!(
            "bench submit via={} count={} clients={} accepted_per_s={:.0} recorded_per_s={:.0} tasks_per_s={:.0} up_peak_rss_kb={}{batch}{taken}{again}",
            self.via,
            self.count,
            self.clients,
            self.accepted_per_s,
            self.recorded_per_s,
            self.tasks_per_s,
            self.up_peak_rss_kb
        )
    }
}

/// Runs the benchmark against a `chime up` of this binary on a fresh installation.
pub async fn run(
    settings: &Settings,
    via: Via,
    count: usize,
    clients: usize,
) -> BenchResult<Figures> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let installation = Installation::create(settings, "submit").await?;
    let (base, up) = spawn_up_on_free_port(installation.settings())?;
    let result = measure(&installation, &base, via, count, clients, &up).await;
    stop(up).await;
    installation.finish().await?;
    result
}

async fn measure(
    installation: &Installation,
    base: &str,
    via: Via,
    count: usize,
    clients: usize,
    up: &tokio::process::Child,
) -> BenchResult<Figures> {
    let http = reqwest::Client::new();
    wait_ready(&http, base).await?;
    // Let the worker register and start consuming before the clock starts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settings = installation.settings();
    let topology = Topology::new(settings.prefix.clone());
    let ids: Vec<Uuid> = (0..count).map(|_| Uuid::now_v7()).collect();
    let publisher = match via {
        Via::Amqp => Some(Publisher::connect(&settings.amqp_url, &topology).await?),
        _ => None,
    };
    let db_started: f64 =
        sqlx::query_scalar("SELECT extract(epoch FROM clock_timestamp())::float8")
            .fetch_one(installation.store.pool())
            .await?;
    let started = Instant::now();
    match via {
        Via::Amqp => {
            publisher
                .as_ref()
                .ok_or("the AMQP door has no publisher")?
                .publish(&ids)
                .await?
        }
        Via::Http => post_each(&http, base, count, clients).await?,
        Via::Batch => post_batches(&http, base, &ids, clients).await?,
    }
    let accepted_s = started.elapsed().as_secs_f64();
    let recorded_s = wait_succeeded(installation, &http, base, via, count as i64, started)
        .await?
        .unwrap_or(accepted_s);
    let last_finished: f64 =
        sqlx::query_scalar("SELECT extract(epoch FROM max(finished_at))::float8 FROM tasks")
            .fetch_one(installation.store.pool())
            .await?;
    let end_to_end_s = last_finished - db_started;
    let metrics = metrics_text(&http, base).await;
    let mean_batch = metrics.as_deref().and_then(|text| mean_batch(text, via));
    let taken = match (via, metrics.as_deref()) {
        (Via::Amqp | Via::Http, Some(text)) => {
            Some(metric_sum(text, "chime_worker_submissions_taken_total", None) / count as f64)
        }
        _ => None,
    };
    let again_new_tasks = if let Some(publisher) = publisher {
        // The same ids again, then one new: once it is a task, the others were taken (one
        // consumer, in order).
        let sentinel = Uuid::now_v7();
        let mut again = ids.clone();
        again.push(sentinel);
        publisher.publish(&again).await?;
        publisher.close().await;
        wait_succeeded(
            installation,
            &http,
            base,
            via,
            count as i64 + 1,
            Instant::now(),
        )
        .await?;
        let tasks: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks")
            .fetch_one(installation.store.pool())
            .await?;
        Some(tasks - count as i64 - 1)
    } else {
        None
    };
    Ok(Figures {
        via,
        count,
        clients: if via == Via::Amqp { 1 } else { clients },
        accepted_per_s: count as f64 / accepted_s.max(1e-9),
        recorded_per_s: count as f64 / recorded_s.max(1e-9),
        tasks_per_s: count as f64 / end_to_end_s.max(1e-9),
        again_new_tasks,
        up_peak_rss_kb: up.id().map_or(0, peak_rss_kb),
        mean_batch,
        taken,
    })
}

/// Waits until `chime up` at `base` answers `/readyz`, for up to 60 s.
pub(crate) async fn wait_ready(http: &reqwest::Client, base: &str) -> BenchResult<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = http.get(format!("{base}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("chime up did not become ready within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Submissions per commit on average, from the service's own histogram.
fn mean_batch(metrics: &str, via: Via) -> Option<f64> {
    let name = match via {
        Via::Amqp => "chime_worker_submission_batch_size",
        Via::Http => "chime_api_submission_batch_size",
        Via::Batch => return None,
    };
    let sum = metric_sum(metrics, &format!("{name}_sum"), None);
    let count = metric_sum(metrics, &format!("{name}_count"), None);
    (count > 0.0).then(|| sum / count)
}

/// The service's `/metrics`, if it answers.
pub(crate) async fn metrics_text(http: &reqwest::Client, base: &str) -> Option<String> {
    http.get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()
}

/// Publishes the AMQP door's benchmark keeps unconfirmed at most.
const UNCONFIRMED: usize = 1000;

/// Waits for a queued publish's confirm: an error unless the broker took the message.
async fn confirmed(publish: QueuedPublish<'_>) -> BenchResult<()> {
    if publish.await?.await?.is_ack() {
        Ok(())
    } else {
        Err("the broker refused a submission".into())
    }
}

/// The AMQP door's client: one connection and one channel with confirms, opened before the clock
/// starts, as a publisher that submits tasks has its connection open already.
struct Publisher {
    conn: Connection,
    channel: lapin::Channel,
    exchange: String,
}

impl Publisher {
    async fn connect(amqp_url: &str, topology: &Topology) -> BenchResult<Self> {
        let conn = Connection::connect(amqp_url, ConnectionProperties::default()).await?;
        let channel = conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self {
            conn,
            channel,
            exchange: topology.submit_exchange(),
        })
    }

    /// Publishes a noop submission per id, with confirms, keeping at most [`UNCONFIRMED`] of
    /// them unconfirmed. Publishes are queued on the channel without awaiting their writes
    /// ([`queue_publish`]), as a client that publishes a burst would: awaiting each one's write
    /// in turn made this process spend a tenth of the machine while it published.
    async fn publish(&self, ids: &[Uuid]) -> BenchResult<()> {
        let bodies: Vec<Vec<u8>> = ids
            .iter()
            .map(|id| {
                SubmitMessage(NewTask {
                    id: Some(*id),
                    kind: "noop".into(),
                    ..NewTask::default()
                })
                .encode()
            })
            .collect();
        // A sliding window, as a publisher that keeps the broker busy does: the next publish
        // goes out as soon as the oldest is confirmed, not after the whole window was.
        let mut unconfirmed = VecDeque::with_capacity(UNCONFIRMED);
        for body in &bodies {
            if unconfirmed.len() == UNCONFIRMED
                && let Some(oldest) = unconfirmed.pop_front()
            {
                confirmed(oldest).await?;
            }
            unconfirmed.push_back(queue_publish(
                &self.channel,
                &self.exchange,
                &self.exchange,
                BasicPublishOptions::default(),
                body,
                BasicProperties::default().with_delivery_mode(2),
            )?);
        }
        for publish in unconfirmed {
            confirmed(publish).await?;
        }
        Ok(())
    }

    async fn close(self) {
        let _ = self.conn.close(200, "done".into()).await;
    }
}

/// `count` single `POST /api/v1/tasks` from `clients` concurrent keep-alive clients.
async fn post_each(
    http: &reqwest::Client,
    base: &str,
    count: usize,
    clients: usize,
) -> BenchResult<()> {
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let url = format!("{base}/api/v1/tasks");
    let workers = (0..clients).map(|_| {
        let (http, url, next) = (http.clone(), url.clone(), next.clone());
        async move {
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < count {
                let response = http
                    .post(&url)
                    .json(&serde_json::json!({"kind": "noop"}))
                    .send()
                    .await?;
                if !response.status().is_success() {
                    return Err(format!("POST /api/v1/tasks: HTTP {}", response.status()).into());
                }
                response.bytes().await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }
    });
    futures::future::try_join_all(workers).await?;
    Ok(())
}

/// The ids in batches of 1,000 through `POST /api/v1/tasks/batch`, `clients` at a time.
async fn post_batches(
    http: &reqwest::Client,
    base: &str,
    ids: &[Uuid],
    clients: usize,
) -> BenchResult<()> {
    let url = format!("{base}/api/v1/tasks/batch");
    let bodies: Vec<serde_json::Value> = ids
        .chunks(1000)
        .map(|chunk| {
            let tasks: Vec<_> = chunk
                .iter()
                .map(|id| serde_json::json!({"kind": "noop", "id": id}))
                .collect();
            serde_json::json!({ "tasks": tasks })
        })
        .collect();
    let queue = std::sync::Arc::new(std::sync::Mutex::new(bodies));
    let workers = (0..clients).map(|_| {
        let (http, url, queue) = (http.clone(), url.clone(), queue.clone());
        async move {
            loop {
                let body = match queue.lock() {
                    Ok(mut bodies) => bodies.pop(),
                    Err(_) => None,
                };
                let Some(body) = body else { return Ok(()) };
                let response = http.post(&url).json(&body).send().await?;
                if !response.status().is_success() {
                    return Err(
                        format!("POST /api/v1/tasks/batch: HTTP {}", response.status()).into(),
                    );
                }
                response.bytes().await?;
            }
        }
    });
    futures::future::try_join_all(workers)
        .await
        .map(drop)
        .map_err(|e: Box<dyn std::error::Error + Send + Sync>| e)
}

/// Waits until `n` tasks have succeeded, as the service's own counter says (a count of every
/// task each 50 ms was about 5 % of PostgreSQL's statement time in the run it measured); the
/// store confirms it once. Returns when the service had counted `n` submissions committed, in
/// seconds from `started`, for the doors that count them (AMQP, single requests).
async fn wait_succeeded(
    installation: &Installation,
    http: &reqwest::Client,
    base: &str,
    via: Via,
    n: i64,
    started: Instant,
) -> BenchResult<Option<f64>> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let recorded_metric = match via {
        // Both counted after the commit.
        Via::Amqp => Some("chime_worker_submissions_total"),
        Via::Http => Some("chime_api_tasks_submitted_total"),
        Via::Batch => None,
    };
    let mut recorded_s = None;
    loop {
        let text = http
            .get(format!("{base}/metrics"))
            .send()
            .await?
            .text()
            .await?;
        if let (None, Some(metric)) = (recorded_s, recorded_metric)
            && metric_sum(&text, metric, None) >= n as f64
        {
            recorded_s = Some(started.elapsed().as_secs_f64());
        }
        let done = metric_sum(
            &text,
            "chime_tasks_finished_total",
            Some("outcome=\"succeeded\""),
        );
        if done >= n as f64 {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("{done} of {n} tasks succeeded after 10 minutes").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let succeeded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tasks WHERE status = 'succeeded'")
            .fetch_one(installation.store.pool())
            .await?;
    if succeeded < n {
        return Err(
            format!("the service counted {n} successes, the store holds {succeeded}").into(),
        );
    }
    Ok(recorded_s.or_else(|| recorded_metric.map(|_| started.elapsed().as_secs_f64())))
}

/// The sum of a metric's samples in Prometheus text, over the label sets that contain `label`
/// (all of them if None).
pub(crate) fn metric_sum(text: &str, name: &str, label: Option<&str>) -> f64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter(|line| label.is_none_or(|label| line.contains(label)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A `chime up` on the installation of `settings`, its API on a free loopback port; returns the
/// API's base URL and the process.
pub(crate) fn spawn_up_on_free_port(
    settings: &Settings,
) -> BenchResult<(String, tokio::process::Child)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    Ok((
        format!("http://127.0.0.1:{port}"),
        spawn_up(settings, port)?,
    ))
}

fn spawn_up(settings: &Settings, port: u16) -> BenchResult<tokio::process::Child> {
    // CHIME_BENCH_UP_BIN measures another build's `chime up` (an earlier commit's, side by side)
    // through this benchmark's doors.
    let binary = match std::env::var_os("CHIME_BENCH_UP_BIN") {
        Some(binary) => std::path::PathBuf::from(binary),
        None => std::env::current_exe()?,
    };
    let addr = format!("127.0.0.1:{port}");
    Ok(
        crate::installation::chime_process(settings, &binary, &["up", "--api-addr", &addr])
            .spawn()?,
    )
}

/// Stops `chime up` as an operator would (SIGTERM), killing it if it takes over 15 s.
pub(crate) async fn stop(mut up: tokio::process::Child) {
    if let Some(pid) = up.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    if tokio::time::timeout(Duration::from_secs(15), up.wait())
        .await
        .is_err()
    {
        let _ = up.kill().await;
    }
}

/// A process's peak resident memory (`VmHWM`), kB; 0 if unknown.
pub(crate) fn peak_rss_kb(pid: u32) -> u64 {
    status_kb(pid, "VmHWM:")
}

/// A process's resident memory now (`VmRSS`), kB; 0 if unknown.
pub(crate) fn rss_kb(pid: u32) -> u64 {
    status_kb(pid, "VmRSS:")
}

/// A kB field of `/proc/PID/status`; 0 if unknown.
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}
