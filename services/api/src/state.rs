//! What every handler shares.

use chime_core::bus::Broker;
use chime_core::store::Store;
use metrics_exporter_prometheus::PrometheusHandle;

/// The API's shared state; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The job store.
    pub store: Store,
    /// The broker (for readiness and names).
    pub broker: Broker,
    /// Bearer token required by mutating calls, if any.
    pub token: Option<String>,
    /// The process's Prometheus recorder.
    pub metrics: Option<PrometheusHandle>,
}
