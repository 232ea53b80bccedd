//! `/api/v1/overview` (the dashboard's first page: is everything on time?) and
//! `/api/v1/dependencies/grid` (the graph of jobs and the jobs × data times grid).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Query, State};
use chime_core::model::{TaskStatus, TaskSummary};
use chime_core::store::dependency_grid::{self, DependencyGrid};
use chime_core::store::services;
use chime_core::store::{gauges, tasks};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;
use crate::state::AppState;

/// One worker group's load.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupLoad {
    /// The worker group.
    pub worker_group: String,
    /// Its tasks not yet ended, by status.
    pub live: BTreeMap<String, i64>,
    /// Workers online serving it.
    pub workers_online: i64,
    /// Messages waiting in its queue (None when the broker did not answer).
    pub queue_depth: Option<u32>,
    /// Consumers on its queues: of the one with fewer (None when the broker did not answer).
    pub consumers: Option<u32>,
    /// Messages waiting in a queue of it that nobody consumes (None when the broker did not
    /// answer).
    pub unconsumed: Option<u32>,
}

/// The whole system at a glance.
#[derive(Debug, Serialize, ToSchema)]
pub struct Overview {
    /// Every task in the store, by status.
    pub counts: BTreeMap<String, i64>,
    /// Each worker group's load.
    pub groups: Vec<GroupLoad>,
    /// Outbox rows due and not yet published.
    pub outbox_backlog: i64,
    /// Seconds since the oldest of them was due.
    pub outbox_oldest_seconds: f64,
    /// Scheduler instances that checked in on time.
    pub schedulers_alive: i64,
    /// Instances of each service kind (scheduler, dependency, api) that checked in on time.
    pub services_alive: BTreeMap<String, i64>,
    /// What is stalled and why, in words: a service kind with no live instance that something
    /// needs, a queue with messages and no consumer.
    pub warnings: Vec<String>,
    /// Whether the API is connected to the broker.
    pub broker_connected: bool,
    /// The latest failed tasks.
    pub recent_failures: Vec<TaskSummary>,
}

/// The system at a glance: tasks by status (the whole store and per worker group), workers online,
/// queue depth and consumers, the outbox backlog, schedulers alive and the latest failures.
#[utoipa::path(get, path = "/api/v1/overview", tag = "tasks", responses((status = 200, body = Overview)))]
pub async fn overview(State(state): State<AppState>) -> Result<Json<Overview>, ApiError> {
    let counts = tasks::count_by_status(&state.store)
        .await?
        .into_iter()
        .map(|(status, n)| (status.to_string(), n))
        .collect();
    let snapshot = gauges::read(&state.store).await?;
    let mut groups = Vec::new();
    for group in &snapshot.worker_groups {
        let live = snapshot
            .live_tasks
            .iter()
            .filter(|(_, g, _)| g == group)
            .map(|(status, _, n)| (status.clone(), *n))
            .collect();
        let workers_online = snapshot.workers_online_in(group);
        let stats = state.broker.group_stats(group).await.ok().flatten();
        groups.push(GroupLoad {
            worker_group: group.clone(),
            live,
            workers_online,
            queue_depth: stats.map(|s| s.messages),
            consumers: stats.map(|s| s.consumers),
            unconsumed: stats.map(|s| s.unconsumed),
        });
    }
    let services_alive = services::alive_by_kind(&state.store).await?;
    let schedulers_alive = services_alive.get("scheduler").copied().unwrap_or(0);
    let mut warnings = Vec::new();
    if schedulers_alive == 0 {
        warnings.push(
            "no scheduler is running: nothing fires, retries are not released and dead workers \
             are not recovered (start `chime scheduler`)"
                .to_string(),
        );
    }
    let dependencies_queue = state.broker.topology().dependencies_queue();
    let events = state
        .broker
        .queue_stats(&dependencies_queue)
        .await
        .ok()
        .flatten();
    let has_dependencies: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM job_dependencies)")
            .fetch_one(state.store.pool())
            .await
            .map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    format!("reading dependencies: {e}"),
                )
            })?;
    if services_alive.get("dependency").copied().unwrap_or(0) == 0
        && (has_dependencies || events.is_some_and(|(messages, _)| messages > 0))
    {
        warnings.push(format!(
            "no dependency service is running: downstream tasks wait and backfills do not \
             advance (start `chime dependency`){}",
            events
                .filter(|(messages, consumers)| *messages > 0 && *consumers == 0)
                .map(|(messages, _)| format!("; {dependencies_queue} holds {messages} events"))
                .unwrap_or_default()
        ));
    }
    for group in &groups {
        if let Some(waiting) = group.unconsumed
            && waiting > 0
        {
            warnings.push(format!(
                "worker group {}: {waiting} task message(s) queued and no worker consuming \
                 (start `chime worker --groups {}`)",
                group.worker_group, group.worker_group
            ));
        }
    }
    let failed = tasks::TaskFilter {
        status: Some(TaskStatus::Failed),
        ..Default::default()
    };
    let recent_failures = tasks::list(&state.store, &failed, 10).await?;
    Ok(Json(Overview {
        counts,
        groups,
        outbox_backlog: snapshot.outbox_backlog,
        outbox_oldest_seconds: snapshot.outbox_oldest_seconds,
        schedulers_alive,
        services_alive,
        warnings,
        broker_connected: state.broker.is_ready(),
        recent_failures,
    }))
}

/// How many data times the grid shows.
#[derive(Debug, Deserialize, IntoParams)]
pub struct GridParams {
    /// Each job's latest this many data times (default 12, at most 200).
    columns: Option<i64>,
    /// Only data times before this (RFC 3339): the next page back in time.
    before: Option<String>,
}

/// The jobs linked by dependencies (the graph) and their tasks for the latest data times (the
/// grid: one cell per job and data time, with the task's status).
#[utoipa::path(
    get, path = "/api/v1/dependencies/grid", tag = "jobs", params(GridParams),
    responses((status = 200, body = DependencyGrid))
)]
pub async fn dependency_grid(
    State(state): State<AppState>,
    Query(params): Query<GridParams>,
) -> Result<Json<DependencyGrid>, ApiError> {
    let before = params
        .before
        .as_deref()
        .filter(|b| !b.is_empty())
        .map(|b| {
            b.parse::<jiff::Timestamp>().map_err(|e| {
                ApiError::bad_request(format!("before {b:?} is not an RFC 3339 time: {e}"))
            })
        })
        .transpose()?;
    Ok(Json(
        dependency_grid::read(&state.store, params.columns.unwrap_or(12), before).await?,
    ))
}
