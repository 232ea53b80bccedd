//! `/api/v1/prune`: removes history older than a cut by hand (admin), beside the schedulers'
//! hourly retention pass.

use axum::Json;
use axum::extract::{Extension, State};
use chime_core::store::audit::AuditDetail;
use chime_core::store::retention::{self, PruneReport};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiJson, ErrorBody};
use crate::state::AppState;

/// The body of `POST /api/v1/prune`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PruneRequest {
    /// Remove ended tasks and fired-trigger rows older than this many seconds.
    pub older_than_s: u64,
    /// Only count what would be removed.
    #[serde(default)]
    pub dry_run: bool,
}

/// Prunes ended tasks (with their attempts) and fired-trigger rows older than the cut; never a
/// task that has not ended, nor one a waiting downstream task may still need.
#[utoipa::path(post, path = "/api/v1/prune", tag = "tasks", request_body = PruneRequest,
    responses((status = 200, body = PruneReport), (status = 400, body = ErrorBody)))]
pub async fn prune(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<PruneRequest>,
) -> Result<(Extension<AuditDetail>, Json<PruneReport>), ApiError> {
    let cut = i64::try_from(request.older_than_s)
        .ok()
        .and_then(|s| {
            jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_secs(s))
                .ok()
        })
        .ok_or_else(|| ApiError::bad_request("older_than_s is too large"))?;
    let report = retention::prune(&state.store, cut, request.dry_run).await?;
    let detail = AuditDetail::created(
        "history tasks".into(),
        serde_json::json!({
            "older_than_s": request.older_than_s,
            "cut": cut,
            "dry_run": request.dry_run,
            "tasks_removed": if request.dry_run { 0 } else { report.tasks },
            "fired_triggers_removed": if request.dry_run { 0 } else { report.fired_triggers },
        }),
    );
    Ok((Extension(detail), Json(report)))
}
