//! `/api/v1/webhooks`: failure notifications, POSTed when a task fails for good (admin; the URLs
//! may carry a receiver's secret, so reading them is admin too).

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use chime_core::store::audit::AuditDetail;
use chime_core::store::webhooks::{self, NewWebhook, WebhookView};

use crate::error::{ApiError, ApiJson, ErrorBody};
use crate::state::AppState;

/// Adds a webhook: for every task's failure, or one job's (`job`).
#[utoipa::path(post, path = "/api/v1/webhooks", tag = "webhooks", request_body = NewWebhook,
    responses((status = 201, body = WebhookView), (status = 400, body = ErrorBody)))]
pub async fn add_webhook(
    State(state): State<AppState>,
    ApiJson(hook): ApiJson<NewWebhook>,
) -> Result<(StatusCode, Extension<AuditDetail>, Json<WebhookView>), ApiError> {
    let made = webhooks::add(&state.store, &hook).await?;
    // A receiver's URL may carry its secret (a password, a token in the query).
    let detail = AuditDetail::created(
        format!("webhook {}", made.id),
        serde_json::json!({
            "url": chime_core::redact::http_url(&made.url),
            "job": made.job,
        }),
    );
    Ok((StatusCode::CREATED, Extension(detail), Json(made)))
}

/// Lists webhooks with their delivered and pending counts.
#[utoipa::path(get, path = "/api/v1/webhooks", tag = "webhooks",
    responses((status = 200, body = Vec<WebhookView>)))]
pub async fn list_webhooks(
    State(state): State<AppState>,
) -> Result<Json<Vec<WebhookView>>, ApiError> {
    Ok(Json(webhooks::list(&state.store).await?))
}

/// Removes a webhook and its deliveries.
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = i64, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    webhooks::delete(&state.store, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
