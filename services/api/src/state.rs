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
    /// Whether every call needs a token even when none exists (the API listens beyond loopback,
    /// or was started with `CHIME_API_TOKEN`, whose row may since have been revoked).
    pub auth_required: bool,
    /// Whether the API listens on loopback only (then, without tokens, only loopback names and
    /// same-origin changes are served).
    pub loopback: bool,
    /// Whether `/metrics` is served without a token.
    pub metrics_public: bool,
    /// The process's Prometheus recorder.
    pub metrics: Option<PrometheusHandle>,
    /// Whether any token exists, read at most once a second.
    pub token_check: std::sync::Arc<crate::auth::TokenCheck>,
    /// Single submissions waiting to share a commit.
    pub submissions: crate::submissions::Submissions,
    /// Live task changes for the dashboard.
    pub events: crate::events::TaskEvents,
    /// Task events as they arrive, for clients waiting for tasks to end.
    pub ends: crate::task_waits::TaskEnds,
    /// The streams open (event feeds, followed logs), bounded in all and per token.
    pub streams: std::sync::Arc<crate::limits::StreamSlots>,
    /// The bytes of batch bodies in flight, bounded.
    pub batch_bytes: std::sync::Arc<crate::limits::BatchBytes>,
    /// Cancelled when the server stops: long-lived streams (events, followed logs) end with it,
    /// so a graceful shutdown does not wait for the clients to leave.
    pub shutdown: tokio_util::sync::CancellationToken,
}
