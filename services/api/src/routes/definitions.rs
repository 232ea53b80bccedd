//! The store's definitions as one document (`chime export`): worker groups, routes, calendars
//! and jobs with their triggers and dependencies; the plan from them to another (`chime plan`,
//! `chime apply --dry-run`); and its apply in one transaction (`chime apply`).

use axum::extract::{RawQuery, State};
use axum::{Extension, Json};
use chime_core::definitions::Definitions;
use chime_core::definitions::plan::Plan;
use chime_core::store::audit::AuditDetail;
use chime_core::store::definitions::{self, ApplyRequest};

use crate::auth::Caller;
use crate::error::{ApiError, ApiJson};
use crate::state::AppState;

/// The definitions, in the order of their names; `?job_group=G` (repeatable) keeps only the
/// jobs of those groups, with the calendars their triggers name.
#[utoipa::path(get, path = "/api/v1/definitions", tag = "definitions",
    params(("job_group" = Option<Vec<String>>, Query, description = "only the jobs of this group (repeatable)")),
    responses((status = 200, body = Definitions)))]
pub async fn export_definitions(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Definitions>, ApiError> {
    let mut job_groups = Vec::new();
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "job_group" => job_groups.push(chime_core::model::names::nfc(&value)),
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {other:?} (job_group is accepted)"
                )));
            }
        }
    }
    Ok(Json(definitions::export(&state.store, &job_groups).await?))
}

/// What applying these definitions would create, update (each changed setting, before and
/// after) and delete; changes nothing, and needs only the read role.
#[utoipa::path(post, path = "/api/v1/definitions/plan", tag = "definitions",
    request_body = ApplyRequest, responses((status = 200, body = Plan)))]
pub async fn plan_definitions(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<ApplyRequest>,
) -> Result<Json<Plan>, ApiError> {
    Ok(Json(definitions::plan(&state.store, &request).await?))
}

/// Applies the definitions in one transaction and answers what it changed (an empty plan:
/// nothing). Any error and nothing changes; the error names the object. Each change is in the
/// audit trail with its source.
#[utoipa::path(post, path = "/api/v1/definitions/apply", tag = "definitions",
    request_body = ApplyRequest,
    responses((status = 200, body = Plan), (status = 400, body = crate::error::ErrorBody),
              (status = 409, body = crate::error::ErrorBody)))]
pub async fn apply_definitions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(request): ApiJson<ApplyRequest>,
) -> Result<(Extension<AuditDetail>, Json<Plan>), ApiError> {
    let plan = definitions::apply(&state.store, &request, &caller.0.name, |user| {
        caller.0.check_execute_user(user)
    })
    .await?;
    let detail = AuditDetail {
        object: Some(format!(
            "definitions {}",
            request.source.as_deref().unwrap_or("(no source)")
        )),
        changes: Vec::new(),
        source: request.source.clone(),
    };
    Ok((Extension(detail), Json(plan)))
}
