//! `/api/v1/jobs`, `/api/v1/triggers`, `/api/v1/calendars`, `/api/v1/schedulers`: what fires,
//! when, and who fires it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chime_core::store::calendars::{self, NamedCalendar};
use chime_core::store::jobs::{self, JobView, NewJob};
use chime_core::store::triggers::{self, NewTrigger, TriggerView};
use serde::Serialize;
use sqlx::FromRow;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiJson, ErrorBody};
use crate::state::AppState;

/// Creates a job.
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs", request_body = NewJob,
    responses((status = 201, body = JobView), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_job(
    State(state): State<AppState>,
    ApiJson(job): ApiJson<NewJob>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(jobs::create(&state.store, job).await?),
    ))
}

/// Lists jobs.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs", responses((status = 200, body = Vec<JobView>)))]
pub async fn list_jobs(State(state): State<AppState>) -> Result<Json<Vec<JobView>>, ApiError> {
    Ok(Json(jobs::list(&state.store).await?))
}

/// Shows a job.
#[utoipa::path(get, path = "/api/v1/jobs/{group}/{name}", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = JobView), (status = 404, body = ErrorBody)))]
pub async fn get_job(
    State(state): State<AppState>,
    Path((group, name)): Path<(String, String)>,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(jobs::get(&state.store, &group, &name).await?))
}

/// Creates a trigger (its first fire time computed; the schedulers woken).
#[utoipa::path(post, path = "/api/v1/triggers", tag = "triggers", request_body = NewTrigger,
    responses((status = 201, body = TriggerView), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_trigger(
    State(state): State<AppState>,
    ApiJson(trigger): ApiJson<NewTrigger>,
) -> Result<(StatusCode, Json<TriggerView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(triggers::create(&state.store, trigger).await?),
    ))
}

/// Lists triggers.
#[utoipa::path(get, path = "/api/v1/triggers", tag = "triggers", responses((status = 200, body = Vec<TriggerView>)))]
pub async fn list_triggers(
    State(state): State<AppState>,
) -> Result<Json<Vec<TriggerView>>, ApiError> {
    Ok(Json(triggers::list(&state.store).await?))
}

/// Shows a trigger with its next fire times.
#[utoipa::path(get, path = "/api/v1/triggers/{group}/{name}", tag = "triggers",
    params(("group" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = TriggerView), (status = 404, body = ErrorBody)))]
pub async fn get_trigger(
    State(state): State<AppState>,
    Path((group, name)): Path<(String, String)>,
) -> Result<Json<TriggerView>, ApiError> {
    Ok(Json(triggers::get(&state.store, &group, &name).await?))
}

/// Creates a calendar.
#[utoipa::path(post, path = "/api/v1/calendars", tag = "calendars", request_body = NamedCalendar,
    responses((status = 201, body = NamedCalendar), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_calendar(
    State(state): State<AppState>,
    ApiJson(calendar): ApiJson<NamedCalendar>,
) -> Result<(StatusCode, Json<NamedCalendar>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(calendars::create(&state.store, calendar).await?),
    ))
}

/// Lists calendars.
#[utoipa::path(get, path = "/api/v1/calendars", tag = "calendars", responses((status = 200, body = Vec<NamedCalendar>)))]
pub async fn list_calendars(
    State(state): State<AppState>,
) -> Result<Json<Vec<NamedCalendar>>, ApiError> {
    Ok(Json(calendars::list(&state.store).await?))
}

/// Deletes a calendar no trigger uses.
#[utoipa::path(delete, path = "/api/v1/calendars/{name}", tag = "calendars",
    params(("name" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete_calendar(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    calendars::delete(&state.store, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A scheduler instance.
#[derive(Debug, Serialize, ToSchema, FromRow)]
pub struct SchedulerView {
    /// Its id.
    pub instance_id: String,
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// Seconds since its last check-in.
    pub seconds_since_checkin: f64,
    /// alive, or dead (no check-in for twice its interval).
    pub status: String,
}

/// Lists scheduler instances.
#[utoipa::path(get, path = "/api/v1/schedulers", tag = "schedulers", responses((status = 200, body = Vec<SchedulerView>)))]
pub async fn list_schedulers(
    State(state): State<AppState>,
) -> Result<Json<Vec<SchedulerView>>, ApiError> {
    let rows: Vec<SchedulerView> = sqlx::query_as(
        "SELECT instance_id, host, pid,
                EXTRACT(EPOCH FROM now() - last_checkin)::float8 AS seconds_since_checkin,
                CASE WHEN last_checkin < now() - make_interval(secs => 2 * checkin_interval_ms / 1000.0)
                     THEN 'dead' ELSE 'alive' END AS status
         FROM scheduler_instances ORDER BY started_at",
    )
    .fetch_all(state.store.pool())
    .await
    .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("listing schedulers: {e}")))?;
    Ok(Json(rows))
}
