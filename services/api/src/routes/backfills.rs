//! `/api/v1/backfills`: list backfills with their progress, show one, cancel one (its tasks that
//! have not ended are killed). Backfills are made on their job: `POST /api/v1/jobs/{group}/{name}/backfill`.

use axum::Json;
use axum::extract::{Path, Query, State};
use chime_core::store::backfills::{self, BackfillProgress};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// How many backfills to list.
#[derive(Debug, Deserialize, IntoParams)]
pub struct BackfillListParams {
    /// At most this many, newest first (default 50).
    limit: Option<i64>,
}

/// Lists backfills, newest first, each with its tasks counted by status.
#[utoipa::path(
    get, path = "/api/v1/backfills", tag = "jobs", params(BackfillListParams),
    responses((status = 200, body = Vec<BackfillProgress>))
)]
pub async fn list_backfills(
    State(state): State<AppState>,
    Query(params): Query<BackfillListParams>,
) -> Result<Json<Vec<BackfillProgress>>, ApiError> {
    Ok(Json(
        backfills::list(&state.store, params.limit.unwrap_or(50)).await?,
    ))
}

/// Shows one backfill and its progress.
#[utoipa::path(
    get, path = "/api/v1/backfills/{id}", tag = "jobs",
    params(("id" = i64, Path, description = "backfill id")),
    responses((status = 200, body = BackfillProgress), (status = 404, body = ErrorBody))
)]
pub async fn get_backfill(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<BackfillProgress>, ApiError> {
    Ok(Json(backfills::get(&state.store, id).await?))
}

/// What a cancel did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Cancelled {
    /// Tasks killed (or, running, told to die).
    pub killed: u64,
    /// The backfill now.
    pub backfill: BackfillProgress,
}

/// Cancels a backfill: every task of it that has not ended is killed, as `chime task kill` would.
#[utoipa::path(
    post, path = "/api/v1/backfills/{id}/cancel", tag = "jobs",
    params(("id" = i64, Path, description = "backfill id")),
    responses((status = 200, body = Cancelled), (status = 404, body = ErrorBody))
)]
pub async fn cancel_backfill(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<Cancelled>, ApiError> {
    let killed = backfills::cancel(&state.store, state.broker.topology(), id).await?;
    Ok(Json(Cancelled {
        killed,
        backfill: backfills::get(&state.store, id).await?,
    }))
}
