//! The store's definitions as a definitions document (`chime export`, `GET /api/v1/definitions`):
//! worker groups, routes, calendars and jobs with their triggers and dependencies, not their
//! history; and the plan from them to a document (`chime plan`).
//!
//! The same store exports the same document, byte for byte once written as YAML: every list in
//! the order of its names, and a setting left out only where it holds the default the API would
//! give it (a job's worker group is always written, since its default follows the kind's
//! route, which may change; the `default` worker group, which always exists, is not). A simple or calendar-interval trigger that was given no start is
//! written with the one it was given when made, so that the document, applied elsewhere, fires
//! at the same times. A trigger that has fired its last time (`complete`) is left out: the API
//! refuses to make a trigger that will never fire.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::FromRow;
use sqlx::types::Json;

use super::calendars::NamedCalendar;
use super::dependencies::{OnUpstreamFailure, Window};
use super::kind_routes::KindRoute;
use super::worker_groups::NewWorkerGroup;
use super::{Context, Store, StoreError};
use crate::definitions::plan::Plan;
use crate::definitions::{Definitions, DependencyDefinition, JobDefinition, TriggerDefinition};
use crate::model::Backoff;
use crate::schedule::misfire::MisfirePolicy;
use crate::schedule::{CalendarSpec, ScheduleSpec};

#[derive(FromRow)]
struct JobRow {
    id: i64,
    group_name: String,
    name: String,
    description: String,
    kind: String,
    spec: Json<serde_json::Value>,
    worker_group: String,
    priority: i32,
    concurrent: bool,
    requests_recovery: bool,
    data: Json<serde_json::Value>,
    reject_retries: i32,
    reject_interval_ms: i64,
    failed_retries: i32,
    failed_interval_ms: i64,
    backoff: Json<Backoff>,
    timeout_ms: Option<i64>,
    data_time_period: Option<String>,
    data_time_zone: String,
    execute_user: Option<String>,
    retention_days: Option<i32>,
    expect_success_within_ms: Option<i64>,
}

#[derive(FromRow)]
struct TriggerRow {
    job_id: i64,
    group_name: String,
    name: String,
    description: String,
    schedule: Json<ScheduleSpec>,
    calendar_name: Option<String>,
    misfire_policy: Json<MisfirePolicy>,
    priority: i32,
    data: Json<serde_json::Value>,
    paused: bool,
    start_time: jiff_sqlx::Timestamp,
}

#[derive(FromRow)]
struct DependencyRow {
    job_id: i64,
    upstream: String,
    window: Json<Window>,
    on_upstream_failure: Json<OnUpstreamFailure>,
}

/// What applying `desired` to the store would do (nothing is deleted: an object the files no
/// longer hold is kept unless the apply prunes its own source's).
pub async fn plan(store: &Store, desired: &Definitions) -> Result<Plan, StoreError> {
    let current = export(store, &[]).await?;
    Ok(crate::definitions::plan::plan(
        &current,
        desired,
        &BTreeSet::new(),
    ))
}

/// The store's definitions; only the jobs of `job_groups` (with the calendars their triggers
/// name, and no worker groups or routes) when any is given.
pub async fn export(store: &Store, job_groups: &[String]) -> Result<Definitions, StoreError> {
    let whole = job_groups.is_empty();
    let mut tx = store.begin().await?;
    // One snapshot: a job deleted between two reads would leave its triggers behind.
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .context("starting the export's snapshot")?;
    let jobs: Vec<JobRow> = sqlx::query_as(
        "SELECT id, group_name, name, description, kind, spec, worker_group, priority,
                concurrent, requests_recovery, data, reject_retries, reject_interval_ms,
                failed_retries, failed_interval_ms, backoff, timeout_ms, data_time_period,
                data_time_zone, execute_user, retention_days, expect_success_within_ms
         FROM jobs WHERE $1 OR group_name = ANY($2)
         ORDER BY group_name COLLATE \"C\", name COLLATE \"C\"",
    )
    .bind(whole)
    .bind(job_groups)
    .fetch_all(&mut *tx)
    .await
    .context("reading the jobs")?;
    let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
    let triggers: Vec<TriggerRow> = sqlx::query_as(
        "SELECT job_id, group_name, name, description, schedule, calendar_name,
                to_jsonb(misfire_policy) AS misfire_policy, priority, data,
                state IN ('paused', 'paused_blocked') AS paused, start_time
         FROM triggers WHERE job_id = ANY($1) AND state <> 'complete'
         ORDER BY group_name COLLATE \"C\", name COLLATE \"C\"",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await
    .context("reading the triggers")?;
    let dependencies: Vec<DependencyRow> = sqlx::query_as(
        "SELECT d.job_id, u.group_name || '.' || u.name AS upstream,
                to_jsonb(d.\"window\") AS window,
                to_jsonb(d.on_upstream_failure) AS on_upstream_failure
         FROM job_dependencies d JOIN jobs u ON u.id = d.depends_on_job_id
         WHERE d.job_id = ANY($1)
         ORDER BY u.group_name COLLATE \"C\", u.name COLLATE \"C\"",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await
    .context("reading the dependencies")?;
    let named: BTreeSet<&str> = triggers
        .iter()
        .filter_map(|t| t.calendar_name.as_deref())
        .collect();
    let calendars: Vec<(String, String, Json<CalendarSpec>)> = sqlx::query_as(
        "SELECT name, description, definition FROM calendars
         ORDER BY name COLLATE \"C\"",
    )
    .fetch_all(&mut *tx)
    .await
    .context("reading the calendars")?;
    let calendars = calendars
        .into_iter()
        .filter(|(name, _, _)| whole || named.contains(name.as_str()))
        .map(|(name, description, definition)| NamedCalendar {
            name,
            description,
            definition: definition.0,
        })
        .collect();
    let (worker_groups, routes) = if whole {
        let groups: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, description FROM worker_groups WHERE name <> 'default'
             ORDER BY name COLLATE \"C\"",
        )
        .fetch_all(&mut *tx)
        .await
        .context("reading the worker groups")?;
        let routes: Vec<(String, String)> = sqlx::query_as(
            "SELECT kind, worker_group FROM job_kind_routes ORDER BY kind COLLATE \"C\"",
        )
        .fetch_all(&mut *tx)
        .await
        .context("reading the routes")?;
        (
            groups
                .into_iter()
                .map(|(name, description)| NewWorkerGroup { name, description })
                .collect(),
            routes
                .into_iter()
                .map(|(kind, worker_group)| KindRoute { kind, worker_group })
                .collect(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    tx.commit().await.context("ending the export's snapshot")?;

    let mut triggers_of: BTreeMap<i64, Vec<TriggerDefinition>> = BTreeMap::new();
    for t in triggers {
        triggers_of.entry(t.job_id).or_default().push(trigger(t));
    }
    let mut upstreams_of: BTreeMap<i64, Vec<DependencyDefinition>> = BTreeMap::new();
    for d in dependencies {
        upstreams_of.entry(d.job_id).or_default().push(
            DependencyDefinition {
                job: d.upstream,
                window: Some(d.window.0),
                on_upstream_failure: Some(d.on_upstream_failure.0),
            }
            .normalized(),
        );
    }
    let jobs = jobs
        .into_iter()
        .map(|row| {
            let id = row.id;
            let mut job = job(row);
            job.triggers = triggers_of.remove(&id).unwrap_or_default();
            job.depends_on = upstreams_of.remove(&id).unwrap_or_default();
            job
        })
        .collect();
    Ok(Definitions {
        worker_groups,
        routes,
        calendars,
        jobs,
    })
}

fn job(r: JobRow) -> JobDefinition {
    JobDefinition {
        group: Some(r.group_name),
        name: r.name,
        description: Some(r.description),
        kind: r.kind,
        spec: r.spec.0,
        worker_group: Some(r.worker_group),
        priority: Some(r.priority),
        concurrent: Some(r.concurrent),
        requests_recovery: Some(r.requests_recovery),
        data: r.data.0,
        reject_retries: Some(r.reject_retries),
        reject_interval_ms: Some(r.reject_interval_ms),
        failed_retries: Some(r.failed_retries),
        failed_interval_ms: Some(r.failed_interval_ms),
        backoff: Some(r.backoff.0),
        timeout_ms: r.timeout_ms,
        data_time_period: r.data_time_period,
        data_time_zone: Some(r.data_time_zone),
        execute_user: r.execute_user,
        retention_days: r.retention_days,
        expect_success_within_ms: r.expect_success_within_ms,
        triggers: Vec::new(),
        depends_on: Vec::new(),
    }
    .normalized()
}

fn trigger(t: TriggerRow) -> TriggerDefinition {
    // The start a trigger was given when made anchors the phase of an interval: written out,
    // the same fires follow wherever the document is applied.
    let schedule = t.schedule.0.anchored_at(t.start_time.to_jiff());
    TriggerDefinition {
        group: Some(t.group_name),
        name: t.name,
        schedule,
        calendar: t.calendar_name,
        misfire_policy: Some(t.misfire_policy.0),
        priority: Some(t.priority),
        description: Some(t.description),
        data: t.data.0,
        paused: Some(t.paused),
    }
    .normalized()
}
