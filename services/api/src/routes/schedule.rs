//! `POST /api/v1/schedule/preview`: a trigger's next fire times, computed by the engine.

use axum::Json;
use chime_core::schedule::{CalendarSpec, ScheduleSpec, format_fire_time, preview};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiJson, ErrorBody};

/// What to preview.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// The trigger's schedule, as JSON (see the book: docs/src/concepts/triggers-and-schedules.md).
    trigger: ScheduleSpec,
    /// An exclusion calendar.
    #[serde(default)]
    calendar: Option<CalendarSpec>,
    /// How many fire times (default 10, at most 10,000).
    #[serde(default)]
    count: Option<usize>,
}

/// The fire times.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewResponse {
    /// RFC 3339 UTC with milliseconds, earliest first.
    fires: Vec<String>,
}

/// Previews a trigger's fire times (from its start_time, or now). Changes nothing.
#[utoipa::path(
    post, path = "/api/v1/schedule/preview", tag = "schedule",
    request_body = PreviewRequest,
    responses(
        (status = 200, description = "fire times", body = PreviewResponse),
        (status = 400, description = "invalid schedule or calendar", body = ErrorBody),
    )
)]
pub async fn preview_schedule(
    ApiJson(request): ApiJson<PreviewRequest>,
) -> Result<Json<PreviewResponse>, ApiError> {
    let count = request.count.unwrap_or(10);
    let fires = preview(
        &request.trigger,
        request.calendar.as_ref(),
        count,
        jiff::Timestamp::now(),
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(Json(PreviewResponse {
        fires: fires.into_iter().map(format_fire_time).collect(),
    }))
}
