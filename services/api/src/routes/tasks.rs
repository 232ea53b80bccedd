//! `/api/v1/tasks`: submit ad-hoc tasks, list, show, kill and re-run them.

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use chime_core::model::{NewTask, TaskStatus, TaskSummary, TaskView};
use chime_core::store::{jobs, task_lifecycle, tasks};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::{Caller, may_execute_as};
use crate::error::{ApiError, ApiJson, ErrorBody};
use crate::state::AppState;

/// Submits an ad-hoc task: the task and its message commit together (with other requests that
/// arrived at the same time); the message is published to the worker group's queue by the outbox
/// relay. The answer is the task as created, without the reasons it may wait (`GET` the task for
/// them).
#[utoipa::path(
    post, path = "/api/v1/tasks", tag = "tasks",
    request_body = NewTask,
    responses(
        (status = 201, description = "created", body = TaskView),
        (status = 200, description = "a task with this id existed", body = TaskView),
        (status = 400, description = "invalid task", body = ErrorBody),
        (status = 403, description = "the token may not submit, or not as this execute_user", body = ErrorBody),
        (status = 422, description = "unknown worker group", body = ErrorBody),
        (status = 413, description = "payload over 1 MiB", body = ErrorBody),
    )
)]
pub async fn create_task(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(mut task): ApiJson<NewTask>,
) -> Result<(StatusCode, Json<TaskView>), ApiError> {
    task.validate()?;
    may_execute_as(&caller, task.execute_user.as_deref())?;
    // Who submitted it is the token's name; only an install without tokens takes the client's
    // word for it.
    if !caller.is_local() || task.submit_user.is_none() {
        task.submit_user = Some(caller.0.name.clone());
    }
    // Written with the other requests that came at the same time, in one commit.
    let (created, view) = state.submissions.submit(task).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

/// The most tasks one `POST /api/v1/tasks/batch` takes.
const MAX_BATCH: usize = 1000;

/// A batch of submissions, each as `POST /api/v1/tasks` takes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tasks": [
    {"kind": "shell", "spec": {"command": ["echo", "one"]}, "id": "0193a3c4-6f1e-7b52-9d1e-3f6b2a9c4d01"},
    {"kind": "noop", "name": "nightly-check", "priority": 7}
]}))]
pub struct NewTasks {
    /// The submissions, 1 to 1,000.
    pub tasks: Vec<NewTask>,
}

/// One submission of a batch: its task's id, and whether this batch made it (false: a task with
/// the client-chosen id existed, or came earlier in the batch).
#[derive(Debug, Serialize, ToSchema)]
pub struct SubmittedTask {
    /// The task's id.
    pub id: Uuid,
    /// Whether this submission made the task.
    pub created: bool,
}

/// The answer to a batch: one entry per submission, in order.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubmittedTasks {
    /// One per submission, in the order given.
    pub tasks: Vec<SubmittedTask>,
}

/// Submits up to 1,000 ad-hoc tasks in one commit: all of them or, if one is refused, none.
/// A refusal names the submission (`tasks[3]: …`). Each is checked as `POST /api/v1/tasks`
/// checks one: its fields, its `execute_user` against the token's, its kind and worker group.
#[utoipa::path(
    post, path = "/api/v1/tasks/batch", tag = "tasks",
    request_body = NewTasks,
    responses(
        (status = 201, description = "every task recorded (or existing, by its id), in order", body = SubmittedTasks),
        (status = 403, description = "a submission's execute_user is not the token's to ask for; nothing written", body = ErrorBody),
        (status = 413, description = "the body is over 16 MiB", body = ErrorBody),
        (status = 422, description = "a submission is invalid, or its kind or group unknown; nothing written", body = ErrorBody),
    )
)]
pub async fn create_tasks(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(batch): ApiJson<NewTasks>,
) -> Result<(StatusCode, Json<SubmittedTasks>), ApiError> {
    let mut tasks = batch.tasks;
    if tasks.is_empty() || tasks.len() > MAX_BATCH {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "tasks: give 1 to {MAX_BATCH} submissions, not {}",
                tasks.len()
            ),
        ));
    }
    let at = |index: usize, error: ApiError| error.at(&format!("tasks[{index}]"));
    for (index, task) in tasks.iter_mut().enumerate() {
        task.validate().map_err(|e| {
            at(
                index,
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
            )
        })?;
        may_execute_as(&caller, task.execute_user.as_deref()).map_err(|e| at(index, e))?;
        if !caller.is_local() || task.submit_user.is_none() {
            task.submit_user = Some(caller.0.name.clone());
        }
    }
    let topology = state.broker.topology();
    let refs: Vec<&NewTask> = tasks.iter().collect();
    let groups = task_lifecycle::route_submissions(&state.store, &refs).await?;
    let mut routed = Vec::with_capacity(tasks.len());
    for (index, (task, group)) in refs.into_iter().zip(groups).enumerate() {
        match group {
            Ok(group) => routed.push((task, group)),
            Err(refusal) => {
                let refusal = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, refusal.to_string());
                return Err(at(index, refusal));
            }
        }
    }
    let rows: Vec<(&NewTask, &str)> = routed
        .iter()
        .map(|(task, group)| (*task, group.as_str()))
        .collect();
    let submitted = task_lifecycle::submit_routed(&state.store, topology, &rows)
        .await
        .map_err(|error| {
            if error.is_refused_data() {
                // What one submission carries, which PostgreSQL refuses: nothing was written.
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("tasks: {error}"))
            } else {
                ApiError::from(error)
            }
        })?;
    metrics::counter!("chime_api_tasks_submitted_total").increment(submitted.len() as u64);
    let tasks = submitted
        .into_iter()
        .map(|s| SubmittedTask {
            id: s.id,
            created: s.created,
        })
        .collect();
    Ok((StatusCode::CREATED, Json(SubmittedTasks { tasks })))
}

/// Filters of the task list; each narrows it.
#[derive(Debug, Deserialize, IntoParams)]
pub struct ListParams {
    /// Only tasks in this status.
    status: Option<String>,
    /// Only tasks of this job: `group.name`, or `name` in the `default` group; where dots could
    /// split it several ways, the split that names an existing job (a 400 if several do: then
    /// use `job_group` and `job_name`).
    job: Option<String>,
    /// With `job_name`: the job's group.
    job_group: Option<String>,
    /// Only tasks of the job of this name (in `job_group`, default `default`).
    job_name: Option<String>,
    /// Only tasks for this worker group.
    worker_group: Option<String>,
    /// Only tasks of this kind.
    kind: Option<String>,
    /// Only tasks created at or after this time (RFC 3339).
    since: Option<String>,
    /// Only tasks whose data time is at or after this time (RFC 3339).
    data_time_from: Option<String>,
    /// Only tasks whose data time is before this time (RFC 3339).
    data_time_to: Option<String>,
    /// The next page: tasks older than this task id (the last id of the previous page).
    before: Option<String>,
    /// Text in the id (a prefix), job name, task name, command, kind, reason or submitter.
    q: Option<String>,
    /// Only tasks whose id starts with this (at least 8 hex digits; hyphens optional).
    id_prefix: Option<String>,
    /// Only tasks of this backfill.
    backfill: Option<i64>,
    /// Only tasks whose current attempt is this worker's (its id).
    worker: Option<String>,
    /// At most this many (default 100, at most 1000).
    limit: Option<i64>,
}

/// Lists the newest tasks that pass the filters, as summaries: a task's spec, data and output are
/// in `GET /api/v1/tasks/{id}`. Page with `before=<last id>`.
#[utoipa::path(
    get, path = "/api/v1/tasks", tag = "tasks",
    params(ListParams),
    responses(
        (status = 200, description = "newest first, as summaries (no spec, data or output)", body = Vec<TaskSummary>),
        (status = 400, description = "a filter that does not parse", body = ErrorBody),
    )
)]
pub async fn list_tasks(
    State(state): State<AppState>,
    Query(params): Query<ListParams>,
) -> Result<Json<Vec<TaskSummary>>, ApiError> {
    let status = params
        .status
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(str::parse::<TaskStatus>)
        .transpose()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let limit = params.limit.unwrap_or(100);
    if limit < 1 {
        return Err(ApiError::bad_request("limit must be at least 1"));
    }
    let time = |name: &str, value: &Option<String>| {
        value
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<jiff::Timestamp>().map_err(|e| {
                    ApiError::bad_request(format!("{name} {v:?} is not an RFC 3339 time: {e}"))
                })
            })
            .transpose()
    };
    let nonempty = |v: Option<String>| v.filter(|v| !v.is_empty());
    let job = match (nonempty(params.job_name), nonempty(params.job)) {
        (Some(name), _) => Some((
            nonempty(params.job_group).unwrap_or_else(|| "default".into()),
            name,
        )),
        // A group or a name may hold dots: the split naming an existing job; none, the first
        // dot's split (which matches nothing, as a filter should); several, say so.
        (None, Some(job)) => {
            let mut found = jobs::find_dotted(&state.store, &job).await?;
            Some(match found.len() {
                1 => found.remove(0),
                0 => match job.split_once('.') {
                    Some((group, name)) => (group.to_string(), name.to_string()),
                    None => ("default".to_string(), job),
                },
                n => {
                    return Err(ApiError::bad_request(format!(
                        "job {job:?} names {n} jobs (its dots split it several ways): give \
                         the group apart (job_group and job_name; in the CLI, --job-group)"
                    )));
                }
            })
        }
        (None, None) => None,
    };
    let before = nonempty(params.before)
        .map(|id| super::parse_uuid(&id, "task"))
        .transpose()?;
    let filter = tasks::TaskFilter {
        status,
        job,
        worker_group: nonempty(params.worker_group),
        kind: nonempty(params.kind),
        since: time("since", &params.since)?,
        data_time_from: time("data_time_from", &params.data_time_from)?,
        data_time_to: time("data_time_to", &params.data_time_to)?,
        before,
        text: nonempty(params.q),
        id_prefix: nonempty(params.id_prefix)
            .map(|p| p.parse::<tasks::IdPrefix>())
            .transpose()
            .map_err(|e| ApiError::bad_request(format!("id_prefix: {e}")))?,
        backfill: params.backfill,
        worker: nonempty(params.worker)
            .map(|id| super::parse_uuid(&id, "worker"))
            .transpose()?,
    };
    Ok(Json(tasks::list(&state.store, &filter, limit).await?))
}

/// Shows one task with all its attempts.
#[utoipa::path(
    get, path = "/api/v1/tasks/{id}", tag = "tasks",
    params(("id" = String, Path, description = "task id (UUID)")),
    responses(
        (status = 200, description = "the task", body = TaskView),
        (status = 400, description = "not a UUID", body = ErrorBody),
        (status = 404, description = "no such task", body = ErrorBody),
    )
)]
pub async fn get_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, ApiError> {
    Ok(Json(tasks::get(&state.store, parse_id(&id)?).await?))
}

/// Kills a task. A waiting, ready or retrying task is `killed` at once (200); a running task's
/// worker is told to kill its process group and records `killed` when it is gone (202: poll the
/// task). A task that has ended already is a conflict (409).
#[utoipa::path(
    post, path = "/api/v1/tasks/{id}/kill", tag = "tasks",
    params(("id" = String, Path, description = "task id (UUID)")),
    responses(
        (status = 200, description = "killed", body = TaskView),
        (status = 202, description = "its worker was told to kill it", body = TaskView),
        (status = 400, description = "not a UUID", body = ErrorBody),
        (status = 404, description = "no such task", body = ErrorBody),
        (status = 409, description = "the task has ended already", body = ErrorBody),
    )
)]
pub async fn kill_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<TaskView>), ApiError> {
    let id = parse_id(&id)?;
    let status = match task_lifecycle::kill(&state.store, state.broker.topology(), id).await? {
        task_lifecycle::KillOutcome::Killed => StatusCode::OK,
        task_lifecycle::KillOutcome::Signalled => StatusCode::ACCEPTED,
        task_lifecycle::KillOutcome::AlreadyEnded(status) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("task {id} has already ended: it is {status}"),
            ));
        }
    };
    metrics::counter!("chime_api_tasks_killed_total").increment(1);
    Ok((status, Json(tasks::get(&state.store, id).await?)))
}

/// How far a re-run reaches.
#[derive(Debug, Deserialize, IntoParams)]
pub struct RerunParams {
    /// Also re-run every downstream task that had ended for the data times this one feeds
    /// (Airflow's Clear → Downstream); without it, only those that failed `upstream_failed`
    /// wait again.
    #[serde(default)]
    downstream: bool,
}

/// A re-run task, and the downstream tasks it made wait again.
#[derive(Debug, Serialize, ToSchema)]
pub struct RerunView {
    /// The task, ready again.
    #[serde(flatten)]
    pub task: TaskView,
    /// The downstream tasks now waiting for it (through the whole DAG).
    pub downstream_waiting: Vec<Uuid>,
}

/// Re-runs a task that has ended (failed, killed or succeeded) as a new attempt; its success
/// advances downstream tasks still waiting for it. Its `upstream_failed` descendants (for the data
/// times it feeds, through the whole DAG) wait again, so a failed chain recovers in one step;
/// `?downstream=true` brings back every descendant that had ended.
#[utoipa::path(
    post, path = "/api/v1/tasks/{id}/rerun", tag = "tasks",
    params(("id" = String, Path, description = "task id (UUID)"), RerunParams),
    responses(
        (status = 200, description = "ready again", body = RerunView),
        (status = 404, description = "no such task", body = ErrorBody),
        (status = 409, description = "the task has not ended", body = ErrorBody),
    )
)]
pub async fn rerun_task(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(params): Query<RerunParams>,
) -> Result<Json<RerunView>, ApiError> {
    let id = parse_id(&id)?;
    // A re-run runs the task's command again as its user, and the commands of the downstream
    // tasks it reopens as theirs: the caller must be allowed each user, as a submitter is. Each
    // task keeps the user it was made with, whatever its job says now, so the check is made on
    // those rows inside the rerun's transaction.
    let may_run_as = |user: Option<&str>| caller.0.check_execute_user(user);
    let downstream_waiting = task_lifecycle::rerun(
        &state.store,
        state.broker.topology(),
        id,
        params.downstream,
        &may_run_as,
    )
    .await?;
    Ok(Json(RerunView {
        task: tasks::get(&state.store, id).await?,
        downstream_waiting,
    }))
}

fn parse_id(id: &str) -> Result<Uuid, ApiError> {
    super::parse_uuid(id, "task")
}
