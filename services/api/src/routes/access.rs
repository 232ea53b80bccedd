//! `/api/v1/tokens`: API tokens and their roles (admin only); `/api/v1/audit`: who changed what.

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use chime_core::model::Role;
use chime_core::store::audit::{self, AuditDetail, AuditEvent};
use chime_core::store::tokens::{self, CreatedToken, TokenView};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ApiJson, ErrorBody};
use crate::state::AppState;

/// The body of `POST /api/v1/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// Its name: recorded as `submit_user` and in the audit trail.
    pub name: String,
    /// `read`, `operate` or `admin`.
    pub role: Role,
    /// The OS users its tasks may ask to run as (`*`: any); default none.
    #[serde(default)]
    pub execute_users: Vec<String>,
}

/// Creates a token; the answer holds its secret, which is not shown again.
#[utoipa::path(
    post, path = "/api/v1/tokens", tag = "access", request_body = NewToken,
    responses(
        (status = 201, description = "created; keep the secret", body = CreatedToken),
        (status = 400, body = ErrorBody), (status = 409, body = ErrorBody),
    )
)]
pub async fn create_token(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(token): ApiJson<NewToken>,
) -> Result<(StatusCode, Extension<AuditDetail>, Json<CreatedToken>), ApiError> {
    // A token gives no more than its creator has.
    let caller_any = caller
        .0
        .execute_users
        .iter()
        .any(|u| u == chime_core::model::ANY_USER);
    if let Some(beyond) = token
        .execute_users
        .iter()
        .find(|u| !caller_any && !caller.0.execute_users.contains(u))
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{:?} may not give execute user {beyond:?}: a token gets no more than its creator",
                caller.0.name
            ),
        ));
    }
    if token.role > caller.0.role {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "a token gets no higher role than its creator's",
        ));
    }
    let created = tokens::create(
        &state.store,
        &token.name,
        token.role,
        &token.execute_users,
        &caller.0.name,
    )
    .await;
    state.token_check.forget();
    let created = created?;
    // The secret is the answer's alone: the trail keeps who may do what.
    let detail = AuditDetail::created(
        format!("token {}", created.token.name),
        serde_json::json!({
            "name": created.token.name,
            "role": created.token.role,
            "execute_users": token.execute_users,
        }),
    );
    Ok((StatusCode::CREATED, Extension(detail), Json(created)))
}

/// Lists the live tokens (never their secrets).
#[utoipa::path(get, path = "/api/v1/tokens", tag = "access",
    responses((status = 200, body = Vec<TokenView>)))]
pub async fn list_tokens(State(state): State<AppState>) -> Result<Json<Vec<TokenView>>, ApiError> {
    Ok(Json(tokens::list(&state.store).await?))
}

/// Revokes a token: it stops working at once.
#[utoipa::path(delete, path = "/api/v1/tokens/{name}", tag = "access",
    params(("name" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke_token(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let revoked = tokens::revoke(&state.store, &name).await;
    state.token_check.forget();
    revoked?;
    Ok(StatusCode::NO_CONTENT)
}

/// Filters of the audit trail.
#[derive(Debug, Deserialize, IntoParams)]
pub struct AuditParams {
    /// Only this actor's changes.
    actor: Option<String>,
    /// Only changes to this object: `job default.export`, or a name of any kind,
    /// `default.export`.
    target: Option<String>,
    /// Only events older than this id (the next page).
    before: Option<i64>,
    /// At most this many (default 100, at most 1000).
    limit: Option<i64>,
}

/// The audit trail, newest first.
#[utoipa::path(get, path = "/api/v1/audit", tag = "access", params(AuditParams),
    responses((status = 200, body = Vec<AuditEvent>)))]
pub async fn list_audit(
    State(state): State<AppState>,
    Query(params): Query<AuditParams>,
) -> Result<Json<Vec<AuditEvent>>, ApiError> {
    let events = audit::list(
        &state.store,
        params.actor.as_deref(),
        params.target.as_deref(),
        params.before,
        params.limit.unwrap_or(100),
    )
    .await?;
    Ok(Json(events))
}
