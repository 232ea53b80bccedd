//! Logs, traces and metrics for every chime process.
//!
//! Logs go to stderr through `tracing` (`RUST_LOG` filters, `CHIME_LOG_FORMAT=json` for JSON lines).
//! Metrics go to a process-wide Prometheus recorder whose rendering the API serves on `/metrics`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the tracing subscriber. Safe to call more than once (later calls do nothing), so tests
/// that start several services in one process can call it freely.
pub fn init_logging(default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let json = std::env::var("CHIME_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let registry = tracing_subscriber::registry().with(filter);
    let _ = if json {
        registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init()
    } else {
        // Colour only for a person at a terminal: piped into a file or a log collector, escape
        // codes are noise.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        registry
            .with(fmt::layer().with_ansi(ansi).with_writer(std::io::stderr))
            .try_init()
    };
}

/// Installs the Prometheus recorder once per process and returns its handle (None if another
/// recorder was installed first).
pub fn metrics_handle() -> Option<PrometheusHandle> {
    PROMETHEUS
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|_| handle)
        })
        .clone()
}
