//! `/api/v1/workers`: the worker registry; `/api/v1/kind-routes`: which group runs which kind.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chime_core::store::kind_routes::{self, KindRoute};
use chime_core::store::workers::{self, WorkerView};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiJson, ErrorBody};
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

/// Asks a worker to drain: it stops taking work, returns what it has not started, finishes what
/// runs within its grace and goes offline, as on SIGTERM.
#[utoipa::path(
    post, path = "/api/v1/workers/{id}/drain", tag = "workers",
    params(("id" = String, Path, description = "worker id (UUID)")),
    responses(
        (status = 202, description = "the worker was told to drain", body = Object),
        (status = 400, description = "not a UUID", body = ErrorBody),
        (status = 404, description = "no such worker", body = ErrorBody),
        (status = 409, description = "the worker is draining or offline already", body = ErrorBody),
    )
)]
pub async fn drain_worker(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let id = super::parse_uuid(&id, "worker")?;
    workers::request_drain(&state.store, state.broker.topology(), id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "id": id, "drain": "requested" })),
    ))
}

/// Lists the kind routes: the default worker group of each job kind.
#[utoipa::path(
    get, path = "/api/v1/kind-routes", tag = "workers",
    responses((status = 200, description = "routes by kind", body = Vec<KindRoute>))
)]
pub async fn list_kind_routes(
    State(state): State<AppState>,
) -> Result<Json<Vec<KindRoute>>, ApiError> {
    Ok(Json(kind_routes::list(&state.store).await?))
}

/// The body of `PUT /api/v1/kind-routes/{kind}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteBody {
    /// The worker group the kind's tasks go to.
    pub worker_group: String,
}

/// Routes a job kind to a worker group (tasks and jobs of that kind without a group go there).
#[utoipa::path(
    put, path = "/api/v1/kind-routes/{kind}", tag = "workers",
    params(("kind" = String, Path, description = "job kind")),
    request_body = RouteBody,
    responses(
        (status = 200, description = "the route", body = KindRoute),
        (status = 422, description = "invalid group", body = ErrorBody),
    )
)]
pub async fn set_kind_route(
    State(state): State<AppState>,
    Path(kind): Path<String>,
    ApiJson(body): ApiJson<RouteBody>,
) -> Result<Json<KindRoute>, ApiError> {
    let route = KindRoute {
        kind,
        worker_group: body.worker_group,
    };
    kind_routes::set(state.store.pool(), &route, None).await?;
    state.submissions.forget_routes();
    Ok(Json(route))
}

/// Removes a kind's route.
#[utoipa::path(
    delete, path = "/api/v1/kind-routes/{kind}", tag = "workers",
    params(("kind" = String, Path, description = "job kind")),
    responses(
        (status = 204, description = "removed"),
        (status = 404, description = "no route for the kind", body = ErrorBody),
    )
)]
pub async fn delete_kind_route(
    State(state): State<AppState>,
    Path(kind): Path<String>,
) -> Result<StatusCode, ApiError> {
    kind_routes::delete(state.store.pool(), &kind).await?;
    state.submissions.forget_routes();
    Ok(StatusCode::NO_CONTENT)
}
