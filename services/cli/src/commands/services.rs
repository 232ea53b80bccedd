//! Running services: `chime up` (everything in one process), `chime api`, `chime worker`,
//! `chime scheduler`, `chime dependency`, `chime migrate`.

use anyhow::{Context, Result};
use chime_core::bus::Topology;
use chime_core::config::WorkerSettings;
use chime_core::{Node, Settings, Store};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

/// Which services a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Services {
    /// The REST API and dashboard.
    pub api: bool,
    /// A worker.
    pub worker: bool,
    /// A scheduler instance (trigger firing).
    pub scheduler: bool,
    /// A dependency service.
    pub dependency: bool,
}

impl Services {
    /// Everything: `chime up`.
    pub const ALL: Self = Self {
        api: true,
        worker: true,
        scheduler: true,
        dependency: true,
    };
    /// The API alone.
    pub const API: Self = Self {
        api: true,
        worker: false,
        scheduler: false,
        dependency: false,
    };
    /// A worker alone.
    pub const WORKER: Self = Self {
        api: false,
        worker: true,
        scheduler: false,
        dependency: false,
    };
    /// A scheduler instance alone.
    pub const SCHEDULER: Self = Self {
        api: false,
        worker: false,
        scheduler: true,
        dependency: false,
    };
    /// A dependency service alone.
    pub const DEPENDENCY: Self = Self {
        api: false,
        worker: false,
        scheduler: false,
        dependency: true,
    };
}

/// Runs `services` on one node until SIGINT or SIGTERM, then stops them cleanly.
pub async fn run(settings: Settings, services: Services) -> Result<()> {
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    run_until(settings, services, shutdown).await
}

/// Runs `services` on one node until `shutdown` (tests use this to run them in-process).
pub async fn run_until(
    settings: Settings,
    services: Services,
    shutdown: CancellationToken,
) -> Result<()> {
    let _ = chime_core::telemetry::metrics_handle();
    // Whatever runs beside a service as the same user (a worker's tasks, when the worker is not
    // root) must not read its environment (database URL, tokens) from /proc/<pid>/environ, nor
    // ptrace it: a process that is not dumpable allows neither to anyone but root.
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(%error, "cannot make the process undumpable: its environment is readable by its user");
    }
    let role = match (
        services.api,
        services.worker,
        services.scheduler,
        services.dependency,
    ) {
        (true, true, true, true) => "up",
        (true, false, false, false) => "api",
        (false, true, false, false) => "worker",
        (false, false, true, false) => "scheduler",
        (false, false, false, true) => "dependency",
        _ => "services",
    };
    let node = Node::start(settings, role)
        .await
        .context("starting the node")?;
    info!(database = %chime_core::config::redact_url(&node.settings.database_url), prefix = %node.settings.prefix, "node started");
    let worker_settings: WorkerSettings = node.settings.worker.clone();
    let running = TaskTracker::new();
    let failed = CancellationToken::new();
    // The first service failure, which the process ends with.
    let failure: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let fail = {
        let (failed, failure) = (failed.clone(), failure.clone());
        move |what: &str, error: String| {
            error!(%error, "{what} stopped");
            if let Ok(mut first) = failure.lock() {
                first.get_or_insert(error);
            }
            failed.cancel();
        }
    };
    // Bind before spawning so a taken port is an error at start-up, not a log line.
    let listener = if services.api {
        Some(chime_api::bind(&node, &node.settings.api_addr).await?)
    } else {
        None
    };
    // A metrics address of its own (the API also serves /metrics on its address, behind its
    // tokens unless public; this one is for a scraper on an internal network).
    let metrics_listener = match &node.settings.metrics_addr {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listening for metrics on {addr}"))?,
        ),
        _ => None,
    };
    let node = std::sync::Arc::new(node);
    if let Some(listener) = metrics_listener {
        let (stop, node) = (shutdown.clone(), node.clone());
        running.spawn(async move {
            if let Err(e) = chime_api::serve_metrics(listener, node, stop).await {
                error!(error = %e, "metrics endpoint stopped");
            }
        });
    }
    if let Some(listener) = listener {
        let state = chime_api::state(&node, &listener);
        let (stop, fail) = (shutdown.clone(), fail.clone());
        running.spawn(async move {
            if let Err(e) = chime_api::serve(listener, state, stop).await {
                fail("the API", e.to_string());
            }
        });
    }
    if services.worker {
        let (node, stop, fail) = (node.clone(), shutdown.clone(), fail.clone());
        // A worker alone in its process (`chime worker`) that drains on command ends the
        // process, as Celery's shutdown does; beside other services it leaves them running.
        let alone = services == Services::WORKER;
        running.spawn(async move {
            match chime_worker::run(&node, worker_settings, stop.clone()).await {
                Ok(()) if alone => stop.cancel(),
                Ok(()) => {}
                Err(e) => fail("the worker", e.to_string()),
            }
        });
    }
    if services.scheduler {
        let (node, stop, fail) = (node.clone(), shutdown.clone(), fail.clone());
        running.spawn(async move {
            let settings =
                chime_scheduler::SchedulerSettings::from_config(&node.settings.scheduler);
            if let Err(e) = chime_scheduler::run(&node, settings, stop).await {
                fail("the scheduler", e.to_string());
            }
        });
    }
    if services.dependency {
        let (node, stop) = (node.clone(), shutdown.clone());
        running.spawn(async move { chime_dependency::run(&node, stop).await });
    }
    running.close();
    let broker = node.broker.clone();
    let mut refused = None;
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = failed.cancelled() => shutdown.cancel(),
        // Credentials the broker refuses are not mended by waiting: stop, saying so.
        reason = broker.refused() => {
            refused = Some(reason);
            shutdown.cancel();
        }
    }
    running.wait().await;
    if let Ok(node) = std::sync::Arc::try_unwrap(node) {
        node.stopped().await;
    }
    info!("stopped");
    if let Some(reason) = refused {
        anyhow::bail!("{reason}");
    }
    if failed.is_cancelled() {
        let first = failure.lock().ok().and_then(|mut f| f.take());
        anyhow::bail!(first.unwrap_or_else(|| "a service failed; see the log above".into()));
    }
    Ok(())
}

/// Applies the migrations (creating the database if needed); with `drop_old_bindings`, also
/// removes the broker bindings only earlier versions need ([`Topology::drop_old_bindings`]).
pub async fn migrate(settings: &Settings, drop_old_bindings: bool) -> Result<()> {
    if drop_old_bindings {
        // An amqps:// URL needs rustls's provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let conn =
            lapin::Connection::connect(&settings.amqp_url, lapin::ConnectionProperties::default())
                .await
                .with_context(|| {
                    format!(
                        "connecting to RabbitMQ at {}",
                        chime_core::config::redact_url(&settings.amqp_url)
                    )
                })?;
        let channel = conn.create_channel().await.context("opening a channel")?;
        let topology = Topology::new(settings.prefix.clone());
        topology
            .declare(&channel)
            .await
            .context("declaring the topology")?;
        topology
            .drop_old_bindings(&channel)
            .await
            .context("removing the old bindings")?;
        let _ = conn.close(200, "done".into()).await;
        println!(
            "removed the bindings of earlier versions from {}",
            topology.dependencies_queue()
        );
    }
    let store = Store::connect(&settings.database_url, 2)
        .await
        .context("migrating the database")?;
    println!(
        "migrations applied to {} (schema {})",
        chime_core::config::redact_url(&settings.database_url),
        store.schema()
    );
    store.close().await;
    Ok(())
}

async fn stop_on_signal(shutdown: CancellationToken) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM");
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("SIGINT: stopping"),
        _ = term.recv() => info!("SIGTERM: stopping"),
    }
    shutdown.cancel();
    // A second signal stops at once.
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    warn!("second signal: exiting now");
    std::process::exit(130);
}
