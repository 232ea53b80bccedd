//! Liveness, readiness and metrics.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

use crate::state::AppState;

/// Alive: the process answers.
pub async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

/// Ready: the database answers and the broker is connected with the topology declared.
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    readiness(&state.store, &state.broker).await
}

/// The readiness answer of a process with `store` and `broker` (the API's `/readyz`, and every
/// service's metrics port).
pub async fn readiness(
    store: &chime_core::store::Store,
    broker: &chime_core::bus::Broker,
) -> impl IntoResponse + use<> {
    let database = store.ping().await.is_ok();
    let broker = broker.is_ready();
    let status = if database && broker {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({"ready": database && broker, "database": database, "broker": broker})),
    )
}

/// Prometheus metrics of this process.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let body = state
        .metrics
        .as_ref()
        .map(|handle| {
            handle.run_upkeep();
            handle.render()
        })
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
