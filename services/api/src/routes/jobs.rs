//! `/api/v1/jobs`, `/api/v1/triggers`, `/api/v1/calendars`, `/api/v1/schedulers`: what fires,
//! when, and who fires it.

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use chime_core::store::backfills::{self, BackfillView, NewBackfill};
use chime_core::store::calendars::{self, NamedCalendar};
use chime_core::store::dependencies::{self, DependencyView, JobDependencies, NewDependency};
use chime_core::store::jobs::{self, JobUpdate, JobView, NewJob};
use chime_core::store::services::{self, ServiceView};
use chime_core::store::task_lifecycle;
use chime_core::store::triggers::{self, NewTrigger, TriggerUpdate, TriggerView};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa::ToSchema;

use chime_core::store::audit::AuditDetail;

use crate::auth::{Caller, may_execute_as};
use crate::error::{ApiError, ApiJson, ErrorBody};
use crate::state::AppState;

/// Creates a job.
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs", request_body = NewJob,
    responses((status = 201, body = JobView), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(job): ApiJson<NewJob>,
) -> Result<(StatusCode, Extension<AuditDetail>, Json<JobView>), ApiError> {
    may_execute_as(&caller, job.execute_user.as_deref())?;
    let view = jobs::create(&state.store, job).await?;
    Ok((
        StatusCode::CREATED,
        created("job", &view.group, &view.name, &view),
        Json(view),
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

/// Replaces a job's settings.
#[utoipa::path(put, path = "/api/v1/jobs/{group}/{name}", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)), request_body = NewJob,
    responses((status = 200, body = JobView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(job): ApiJson<NewJob>,
) -> Result<(Extension<AuditDetail>, Json<JobView>), ApiError> {
    may_execute_as(&caller, job.execute_user.as_deref())?;
    let update = jobs::update(&state.store, &group, &name, job).await?;
    Ok((audited(&update), Json(update.job)))
}

/// Changes only the settings the body names (a JSON merge patch: `{"timeout_ms": 60000}`; `null`
/// returns a setting to its default), and answers with the job and each setting changed.
#[utoipa::path(patch, path = "/api/v1/jobs/{group}/{name}", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)),
    request_body(content = Object, description = "the settings to change, as `NewJob` names them",
                 example = json!({"timeout_ms": 60000, "description": "nightly export"})),
    responses((status = 200, body = JobUpdate), (status = 400, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn patch_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(patch): ApiJson<serde_json::Value>,
) -> Result<(Extension<AuditDetail>, Json<JobUpdate>), ApiError> {
    let update = jobs::patch(&state.store, &group, &name, &patch, |user| {
        caller.0.check_execute_user(user)
    })
    .await?;
    Ok((audited(&update), Json(update)))
}

/// Tells the audit trail which job changed, and how.
fn audited(update: &JobUpdate) -> Extension<AuditDetail> {
    Extension(AuditDetail {
        object: Some(format!("job {}.{}", update.job.group, update.job.name)),
        changes: chime_core::store::patch::redacted(&update.changes),
        source: None,
    })
}

/// Tells the audit trail what a creation made: the object, and each of its settings as the
/// answer shows them.
fn created(
    kind: &str,
    group: &str,
    name: &str,
    view: &impl serde::Serialize,
) -> Extension<AuditDetail> {
    Extension(AuditDetail::created(
        format!("{kind} {group}.{name}"),
        serde_json::to_value(view).unwrap_or_default(),
    ))
}

/// Creates a trigger (its first fire time computed; the schedulers woken).
#[utoipa::path(post, path = "/api/v1/triggers", tag = "triggers", request_body = NewTrigger,
    responses((status = 201, body = TriggerView), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_trigger(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(trigger): ApiJson<NewTrigger>,
) -> Result<(StatusCode, Extension<AuditDetail>, Json<TriggerView>), ApiError> {
    let job_group = trigger.job_group.as_deref().unwrap_or("default");
    may_run_jobs_of(&state, &caller, job_group, &trigger.job, false).await?;
    let view = triggers::create(&state.store, trigger).await?;
    Ok((
        StatusCode::CREATED,
        created("trigger", &view.group, &view.name, &view),
        Json(view),
    ))
}

/// Lists triggers.
#[utoipa::path(get, path = "/api/v1/triggers", tag = "triggers", responses((status = 200, body = Vec<TriggerView>)))]
pub async fn list_triggers(
    State(state): State<AppState>,
) -> Result<Json<Vec<TriggerView>>, ApiError> {
    Ok(Json(triggers::list(&state.store).await?))
}

/// How many fire times a trigger's view lists.
#[derive(Debug, Deserialize, IntoParams)]
pub struct TriggerParams {
    /// Its next this many fire times (default 10, 0 to 1000).
    count: Option<i64>,
}

/// Shows a trigger with its next fire times.
#[utoipa::path(get, path = "/api/v1/triggers/{group}/{name}", tag = "triggers",
    params(("group" = String, Path), ("name" = String, Path), TriggerParams),
    responses((status = 200, body = TriggerView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_trigger(
    State(state): State<AppState>,
    Path((group, name)): Path<(String, String)>,
    Query(params): Query<TriggerParams>,
) -> Result<Json<TriggerView>, ApiError> {
    let count = match params.count {
        None => triggers::NEXT_FIRES,
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| *n <= triggers::MAX_NEXT_FIRES)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "count {n}: give 0 to {} fire times",
                    triggers::MAX_NEXT_FIRES
                ))
            })?,
    };
    Ok(Json(
        triggers::get(&state.store, &group, &name, count).await?,
    ))
}

/// Creates a calendar.
#[utoipa::path(post, path = "/api/v1/calendars", tag = "calendars", request_body = NamedCalendar,
    responses((status = 201, body = NamedCalendar), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_calendar(
    State(state): State<AppState>,
    ApiJson(calendar): ApiJson<NamedCalendar>,
) -> Result<(StatusCode, Extension<AuditDetail>, Json<NamedCalendar>), ApiError> {
    let made = calendars::create(state.store.pool(), calendar, None).await?;
    let detail = Extension(AuditDetail::created(
        format!("calendar {}", made.name),
        serde_json::to_value(&made).unwrap_or_default(),
    ));
    Ok((StatusCode::CREATED, detail, Json(made)))
}

/// Lists calendars.
#[utoipa::path(get, path = "/api/v1/calendars", tag = "calendars", responses((status = 200, body = Vec<NamedCalendar>)))]
pub async fn list_calendars(
    State(state): State<AppState>,
) -> Result<Json<Vec<NamedCalendar>>, ApiError> {
    Ok(Json(calendars::list(&state.store).await?))
}

/// Replaces a calendar's definition.
#[utoipa::path(put, path = "/api/v1/calendars/{name}", tag = "calendars",
    params(("name" = String, Path)), request_body = NamedCalendar,
    responses((status = 200, body = NamedCalendar), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_calendar(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(calendar): ApiJson<NamedCalendar>,
) -> Result<Json<NamedCalendar>, ApiError> {
    let calendar = NamedCalendar { name, ..calendar };
    Ok(Json(
        calendars::update(state.store.pool(), calendar, None).await?,
    ))
}

/// Deletes a calendar no trigger uses.
#[utoipa::path(delete, path = "/api/v1/calendars/{name}", tag = "calendars",
    params(("name" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete_calendar(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    calendars::delete(state.store.pool(), &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Lists scheduler instances (`GET /api/v1/services` lists every kind).
#[utoipa::path(get, path = "/api/v1/schedulers", tag = "schedulers", responses((status = 200, body = Vec<ServiceView>)))]
pub async fn list_schedulers(
    State(state): State<AppState>,
) -> Result<Json<Vec<ServiceView>>, ApiError> {
    Ok(Json(services::list(&state.store, Some("scheduler")).await?))
}

/// Lists every service instance that checks in — schedulers, dependency services, APIs — alive
/// or dead (no check-in for twice its interval). Workers are under `/api/v1/workers`.
#[utoipa::path(get, path = "/api/v1/services", tag = "schedulers", responses((status = 200, body = Vec<ServiceView>)))]
pub async fn list_services(
    State(state): State<AppState>,
) -> Result<Json<Vec<ServiceView>>, ApiError> {
    Ok(Json(services::list(&state.store, None).await?))
}

/// What a job run asks for.
#[derive(Debug, Default, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Data added to the job's.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// The data time (default now).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<jiff::Timestamp>,
}

/// The task a run made.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunResponse {
    /// The task's id.
    pub task_id: uuid::Uuid,
}

/// How many triggers a pause or resume changed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Changed {
    /// Triggers changed.
    pub triggers: u64,
}

/// 403 unless the caller may have tasks run as the user of the job and of every job its success
/// runs (downstream jobs without triggers of their own; every downstream job for a backfill
/// `with_downstream`): running, scheduling or resuming a job submits its tasks, so the same
/// execute-user rule holds as for `POST /api/v1/tasks`.
async fn may_run_jobs_of(
    state: &AppState,
    caller: &Caller,
    group: &str,
    name: &str,
    with_downstream: bool,
) -> Result<(), ApiError> {
    for (job, user) in
        dependencies::execute_users(state.store.pool(), group, name, with_downstream).await?
    {
        caller
            .0
            .check_execute_user(user.as_deref())
            .map_err(|why| ApiError::new(StatusCode::FORBIDDEN, format!("job {job}: {why}")))?;
    }
    Ok(())
}

/// Which of a job's tasks a bulk rerun or kill picks, and how.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// Only tasks in these statuses (default: every ended one for a rerun, every one not ended
    /// for a kill).
    #[serde(default)]
    pub status: Option<Vec<String>>,
    /// Only data times at or after this (RFC 3339).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time_from: Option<jiff::Timestamp>,
    /// Only data times at or before this (RFC 3339).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time_to: Option<jiff::Timestamp>,
    /// A rerun also re-runs every downstream task that had ended.
    #[serde(default)]
    pub downstream: bool,
    /// Change nothing: answer with what would be done.
    #[serde(default)]
    pub dry_run: bool,
}

impl BulkRequest {
    fn pick(&self, job_id: i64, allowed: &[&str]) -> Result<task_lifecycle::JobTasks, ApiError> {
        if let Some(statuses) = &self.status
            && let Some(bad) = statuses.iter().find(|s| !allowed.contains(&s.as_str()))
        {
            return Err(ApiError::bad_request(format!(
                "status {bad:?}: use {}",
                allowed.join(", ")
            )));
        }
        if let (Some(from), Some(to)) = (self.data_time_from, self.data_time_to)
            && from > to
        {
            return Err(ApiError::bad_request(
                "data_time_from is after data_time_to".to_string(),
            ));
        }
        Ok(task_lifecycle::JobTasks {
            job_id,
            statuses: self.status.clone(),
            data_time_from: self.data_time_from,
            data_time_to: self.data_time_to,
        })
    }
}

/// Re-runs, in one transaction, every ended task of a job that the body picks (by status and
/// data-time range), each as `POST /api/v1/tasks/{id}/rerun` does (its `upstream_failed`
/// descendants wait again; `downstream`: every ended descendant). `dry_run` reports only.
#[utoipa::path(post, path = "/api/v1/jobs/{group}/{name}/tasks/rerun", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)), request_body = BulkRequest,
    responses((status = 200, body = task_lifecycle::BulkOutcome), (status = 400, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn rerun_job_tasks(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(request): ApiJson<BulkRequest>,
) -> Result<Json<task_lifecycle::BulkOutcome>, ApiError> {
    let job = jobs::get(&state.store, &group, &name).await?;
    let pick = request.pick(job.id, &["failed", "killed", "succeeded"])?;
    // Each task re-run or reopened runs as the user it was made with: checked on those rows,
    // inside the transaction.
    let may_run_as = |user: Option<&str>| caller.0.check_execute_user(user);
    Ok(Json(
        task_lifecycle::rerun_job_tasks(
            &state.store,
            state.broker.topology(),
            &pick,
            request.downstream,
            request.dry_run,
            &may_run_as,
        )
        .await?,
    ))
}

/// Kills, in one statement, every task of a job not ended yet that the body picks (by status
/// and data-time range), each as `POST /api/v1/tasks/{id}/kill` does. `dry_run` reports only.
#[utoipa::path(post, path = "/api/v1/jobs/{group}/{name}/tasks/kill", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)), request_body = BulkRequest,
    responses((status = 200, body = task_lifecycle::BulkOutcome), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn kill_job_tasks(
    State(state): State<AppState>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(request): ApiJson<BulkRequest>,
) -> Result<Json<task_lifecycle::BulkOutcome>, ApiError> {
    let job = jobs::get(&state.store, &group, &name).await?;
    if request.downstream {
        return Err(ApiError::bad_request(
            "downstream: a kill takes only the job's own tasks".to_string(),
        ));
    }
    let pick = request.pick(job.id, &["waiting", "ready", "retrying", "running"])?;
    Ok(Json(
        task_lifecycle::kill_job_tasks(
            &state.store,
            state.broker.topology(),
            &pick,
            request.dry_run,
        )
        .await?,
    ))
}

/// Runs a job now (a task outside its triggers).
#[utoipa::path(post, path = "/api/v1/jobs/{group}/{name}/run", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)), request_body = RunRequest,
    responses((status = 201, body = RunResponse), (status = 404, body = ErrorBody)))]
pub async fn run_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(run): ApiJson<RunRequest>,
) -> Result<(StatusCode, Json<RunResponse>), ApiError> {
    may_run_jobs_of(&state, &caller, &group, &name, false).await?;
    let task_id = chime_core::store::task_lifecycle::run_job_now(
        &state.store,
        state.broker.topology(),
        &group,
        &name,
        run.data,
        run.data_time,
        Some(&caller.0.name),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(RunResponse { task_id })))
}

/// `?force=true` on a job's deletion.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct DeleteParams {
    /// Also remove the dependencies other jobs have on it.
    #[serde(default)]
    force: bool,
}

/// Deletes a job and its triggers (its tasks stay). A job others depend on is refused (409,
/// naming them) unless `force=true`.
#[utoipa::path(delete, path = "/api/v1/jobs/{group}/{name}", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path), DeleteParams),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete_job(
    State(state): State<AppState>,
    Path((group, name)): Path<(String, String)>,
    Query(params): Query<DeleteParams>,
) -> Result<StatusCode, ApiError> {
    jobs::delete(&state.store, &group, &name, params.force).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A job's dependencies, both ways.
#[utoipa::path(get, path = "/api/v1/jobs/{group}/{name}/dependencies", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = JobDependencies)))]
pub async fn list_dependencies(
    State(state): State<AppState>,
    Path((group, name)): Path<(String, String)>,
) -> Result<Json<JobDependencies>, ApiError> {
    Ok(Json(
        dependencies::of_job(&state.store, &group, &name).await?,
    ))
}

/// Makes the job depend on an upstream job (a cycle is refused, named).
#[utoipa::path(post, path = "/api/v1/jobs/{group}/{name}/dependencies", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)), request_body = NewDependency,
    responses((status = 201, body = DependencyView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn add_dependency(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(dependency): ApiJson<NewDependency>,
) -> Result<(StatusCode, Json<DependencyView>), ApiError> {
    // The job will run whenever its upstream succeeds: as its user.
    may_run_jobs_of(&state, &caller, &group, &name, false).await?;
    let view = dependencies::add(&state.store, &group, &name, dependency).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Removes the job's dependency on an upstream job.
#[utoipa::path(delete, path = "/api/v1/jobs/{group}/{name}/dependencies/{upstream_group}/{upstream}", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path), ("upstream_group" = String, Path), ("upstream" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn remove_dependency(
    State(state): State<AppState>,
    Path((group, name, upstream_group, upstream)): Path<(String, String, String, String)>,
) -> Result<StatusCode, ApiError> {
    dependencies::remove(
        state.store.pool(),
        &group,
        &name,
        &upstream_group,
        &upstream,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Backfills the job: a task for every fire time of its triggers in the range.
#[utoipa::path(post, path = "/api/v1/jobs/{group}/{name}/backfill", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path)), request_body = NewBackfill,
    responses((status = 201, body = BackfillView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn backfill_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(backfill): ApiJson<NewBackfill>,
) -> Result<(StatusCode, Json<BackfillView>), ApiError> {
    may_run_jobs_of(&state, &caller, &group, &name, backfill.with_downstream).await?;
    let view = backfills::create(
        &state.store,
        state.broker.topology(),
        &group,
        &name,
        backfill,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Replaces a trigger's schedule, job, calendar and policy; it restarts from its new first fire.
#[utoipa::path(put, path = "/api/v1/triggers/{group}/{name}", tag = "triggers",
    params(("group" = String, Path), ("name" = String, Path)), request_body = NewTrigger,
    responses((status = 200, body = TriggerView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_trigger(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(trigger): ApiJson<NewTrigger>,
) -> Result<Json<TriggerView>, ApiError> {
    let job_group = trigger.job_group.as_deref().unwrap_or("default");
    may_run_jobs_of(&state, &caller, job_group, &trigger.job, false).await?;
    Ok(Json(
        triggers::update(&state.store, &group, &name, trigger).await?,
    ))
}

/// Changes only the trigger settings the body names (a JSON merge patch: `{"priority": 9}`);
/// a new schedule or calendar restarts it from its new first fire, anything else keeps its
/// next fire. Answers with the trigger and each setting changed.
#[utoipa::path(patch, path = "/api/v1/triggers/{group}/{name}", tag = "triggers",
    params(("group" = String, Path), ("name" = String, Path)),
    request_body(content = Object, description = "the settings to change, as `NewTrigger` names them",
                 example = json!({"misfire_policy": "fire_now", "priority": 9})),
    responses((status = 200, body = TriggerUpdate), (status = 400, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn patch_trigger(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name)): Path<(String, String)>,
    ApiJson(patch): ApiJson<serde_json::Value>,
) -> Result<(Extension<AuditDetail>, Json<TriggerUpdate>), ApiError> {
    let update = triggers::patch(&state.store, &group, &name, &patch, |user| {
        caller.0.check_execute_user(user)
    })
    .await?;
    let detail = Extension(AuditDetail {
        object: Some(format!("trigger {group}.{name}")),
        changes: update.changes.clone(),
        source: None,
    });
    Ok((detail, Json(update)))
}

/// Deletes a trigger.
#[utoipa::path(delete, path = "/api/v1/triggers/{group}/{name}", tag = "triggers",
    params(("group" = String, Path), ("name" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete_trigger(
    State(state): State<AppState>,
    Path((group, name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    triggers::delete(&state.store, &group, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn pause_or_resume(
    state: &AppState,
    target: triggers::Target<'_>,
    action: &str,
) -> Result<Json<Changed>, ApiError> {
    let changed = match action {
        "pause" => triggers::pause(&state.store, target).await?,
        "resume" => triggers::resume(&state.store, target).await?,
        other => {
            return Err(ApiError::not_found(format!(
                "no action {other:?} (pause or resume)"
            )));
        }
    };
    Ok(Json(Changed { triggers: changed }))
}

/// Pauses or resumes a trigger.
#[utoipa::path(post, path = "/api/v1/triggers/{group}/{name}/{action}", tag = "triggers",
    params(("group" = String, Path), ("name" = String, Path),
           ("action" = String, Path, description = "pause or resume")),
    responses((status = 200, body = Changed), (status = 404, body = ErrorBody)))]
pub async fn trigger_action(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name, action)): Path<(String, String, String)>,
) -> Result<Json<Changed>, ApiError> {
    if action == "resume" {
        let trigger = triggers::get(&state.store, &group, &name, 0).await?;
        may_run_jobs_of(&state, &caller, &trigger.job_group, &trigger.job, false).await?;
    }
    pause_or_resume(&state, triggers::Target::Trigger(&group, &name), &action).await
}

/// Pauses or resumes every trigger of a group (and those added to it while paused).
#[utoipa::path(post, path = "/api/v1/trigger-groups/{group}/{action}", tag = "triggers",
    params(("group" = String, Path), ("action" = String, Path, description = "pause or resume")),
    responses((status = 200, body = Changed), (status = 404, body = ErrorBody)))]
pub async fn group_action(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, action)): Path<(String, String)>,
) -> Result<Json<Changed>, ApiError> {
    if action == "resume" {
        // Each job once, however many of the group's triggers fire it.
        let jobs: std::collections::BTreeSet<(String, String)> = triggers::list(&state.store)
            .await?
            .into_iter()
            // Resuming the marker of every group (Quartz's resumeAll) resumes every trigger.
            .filter(|t| t.group == group || group == triggers::ALL_GROUPS)
            .map(|t| (t.job_group, t.job))
            .collect();
        for (job_group, job) in jobs {
            may_run_jobs_of(&state, &caller, &job_group, &job, false).await?;
        }
    }
    pause_or_resume(&state, triggers::Target::Group(&group), &action).await
}

/// Pauses or resumes every trigger of a job.
#[utoipa::path(post, path = "/api/v1/jobs/{group}/{name}/{action}", tag = "jobs",
    params(("group" = String, Path), ("name" = String, Path),
           ("action" = String, Path, description = "pause or resume")),
    responses((status = 200, body = Changed), (status = 404, body = ErrorBody)))]
pub async fn job_action(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((group, name, action)): Path<(String, String, String)>,
) -> Result<Json<Changed>, ApiError> {
    if action == "resume" {
        may_run_jobs_of(&state, &caller, &group, &name, false).await?;
    }
    pause_or_resume(&state, triggers::Target::Job(&group, &name), &action).await
}
