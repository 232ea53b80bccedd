//! `/api/v1/worker-groups`: the declared worker groups (queues); tasks, jobs and routes may name
//! only these.

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use chime_core::store::audit::AuditDetail;
use chime_core::store::worker_groups::{self, NewWorkerGroup, WorkerGroupView};

use crate::error::{ApiError, ApiJson, ErrorBody};
use crate::state::AppState;

/// Declares a worker group.
#[utoipa::path(post, path = "/api/v1/worker-groups", tag = "workers", request_body = NewWorkerGroup,
    responses((status = 201, body = WorkerGroupView), (status = 400, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
pub async fn create_group(
    State(state): State<AppState>,
    ApiJson(group): ApiJson<NewWorkerGroup>,
) -> Result<(StatusCode, Extension<AuditDetail>, Json<WorkerGroupView>), ApiError> {
    let made = worker_groups::create(&state.store, &group).await?;
    let detail = AuditDetail::created(
        format!("worker-group {}", made.name),
        serde_json::json!({ "name": made.name, "description": made.description }),
    );
    Ok((StatusCode::CREATED, Extension(detail), Json(made)))
}

/// Lists the worker groups with their workers, jobs and live tasks.
#[utoipa::path(get, path = "/api/v1/worker-groups", tag = "workers",
    responses((status = 200, body = Vec<WorkerGroupView>)))]
pub async fn list_groups(
    State(state): State<AppState>,
) -> Result<Json<Vec<WorkerGroupView>>, ApiError> {
    Ok(Json(worker_groups::list(&state.store).await?))
}

/// Shows one worker group.
#[utoipa::path(get, path = "/api/v1/worker-groups/{name}", tag = "workers",
    params(("name" = String, Path)),
    responses((status = 200, body = WorkerGroupView), (status = 404, body = ErrorBody)))]
pub async fn get_group(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<WorkerGroupView>, ApiError> {
    Ok(Json(worker_groups::get(&state.store, &name).await?))
}

/// Deletes a worker group that no job, route or live task uses.
#[utoipa::path(delete, path = "/api/v1/worker-groups/{name}", tag = "workers",
    params(("name" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete_group(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    worker_groups::delete(&state.store, &name).await?;
    state.submissions.forget_routes();
    Ok(StatusCode::NO_CONTENT)
}
