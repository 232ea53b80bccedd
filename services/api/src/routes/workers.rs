//! `/api/v1/workers`: the worker registry.

use axum::Json;
use axum::extract::State;
use chime_core::store::workers::{self, WorkerView};

use crate::error::ApiError;
use crate::state::AppState;

/// Lists workers seen in the last day, live ones first.
#[utoipa::path(
    get, path = "/api/v1/workers", tag = "workers",
    responses((status = 200, description = "workers", body = Vec<WorkerView>))
)]
pub async fn list_workers(
    State(state): State<AppState>,
) -> Result<Json<Vec<WorkerView>>, ApiError> {
    Ok(Json(workers::list(&state.store).await?))
}
