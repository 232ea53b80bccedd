//! Logs, traces and metrics for every chime process.
//!
//! Logs go to stderr through `tracing` (`RUST_LOG` filters, `CHIME_LOG_FORMAT=json` for JSON lines).
//! Metrics go to a process-wide Prometheus recorder, rendered on `/metrics` by the API and by every
//! service given `--metrics-addr`; [`catalog`] lists them all with their help text.

pub mod catalog;

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
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
            // Durations are histograms (buckets aggregate across instances; quantiles do not).
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("_seconds".into()),
                    catalog::SECONDS_BUCKETS,
                )
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            let installed = metrics::set_global_recorder(recorder).ok().map(|_| handle);
            if let Some(handle) = &installed {
                catalog::describe();
                keep_histograms_drained(handle.clone());
            }
            installed
        })
        .clone()
}

/// How often the recorder folds recorded histogram samples into its buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds the recorder's pending histogram samples into their buckets every [`UPKEEP_EVERY`], on a
/// thread of its own for the life of the process.
///
/// The recorder keeps every sample (8 bytes, in blocks) until its upkeep folds them in, and a
/// recorder built rather than installed by the exporter's own `install` gets no upkeep but the
/// one a scrape of `/metrics` does. An installation nobody scraped kept about 25 bytes per task
/// for ever (a task's attempt duration, the dependency service's handling of its event, a
/// share of each batch's and publish round's samples), 21 MB over 870,000 tasks. A thread, not
/// a task: the handle is made before (and outside) any runtime, and upkeep is a few
/// microseconds of locking that must not wait behind a busy runtime.
fn keep_histograms_drained(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_EVERY);
                handle.run_upkeep();
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the metrics upkeep thread: histogram samples are folded only when /metrics is scraped");
    }
}
