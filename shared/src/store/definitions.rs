//! The store's definitions as a definitions document (`chime export`, `GET /api/v1/definitions`):
//! worker groups, routes, calendars and jobs with their triggers and dependencies, not their
//! history.
//!
//! The same store exports the same document, byte for byte once written as YAML: every list in
//! the order of its names, and a setting left out only where it holds the default the API would
//! give it (a job's worker group is always written, since its default follows the kind's
//! route, which may change; the `default` worker group, which always exists, is not). A simple or calendar-interval trigger that was given no start is
//! written with the one it was given when made, so that the document, applied elsewhere, fires
//! at the same times.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::FromRow;
use sqlx::types::Json;

use super::calendars::NamedCalendar;
use super::dependencies::{OnUpstreamFailure, Window};
use super::kind_routes::KindRoute;
use super::worker_groups::NewWorkerGroup;
use super::{Context, Store, StoreError};
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
         FROM triggers WHERE job_id = ANY($1)
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
        upstreams_of
            .entry(d.job_id)
            .or_default()
            .push(DependencyDefinition {
                job: d.upstream,
                window: Some(d.window.0).filter(|w| *w != Window::default()),
                on_upstream_failure: Some(d.on_upstream_failure.0)
                    .filter(|f| *f != OnUpstreamFailure::default()),
            });
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

/// `value`, unless it is `default`.
fn unless<T: PartialEq>(value: T, default: T) -> Option<T> {
    (value != default).then_some(value)
}

/// An empty object as nothing: the API stores no data or spec as `{}`.
fn unless_empty(value: serde_json::Value) -> serde_json::Value {
    if value.as_object().is_some_and(|o| o.is_empty()) {
        serde_json::Value::Null
    } else {
        value
    }
}

fn job(r: JobRow) -> JobDefinition {
    JobDefinition {
        group: unless(r.group_name, "default".into()),
        name: r.name,
        description: unless(r.description, String::new()),
        kind: r.kind,
        spec: unless_empty(r.spec.0),
        worker_group: Some(r.worker_group),
        priority: unless(r.priority, 5),
        concurrent: unless(r.concurrent, true),
        requests_recovery: unless(r.requests_recovery, false),
        data: unless_empty(r.data.0),
        reject_retries: unless(r.reject_retries, 0),
        reject_interval_ms: unless(r.reject_interval_ms, 3000),
        failed_retries: unless(r.failed_retries, 0),
        failed_interval_ms: unless(r.failed_interval_ms, 3000),
        backoff: unless(r.backoff.0, Backoff::default()),
        timeout_ms: r.timeout_ms,
        data_time_period: r.data_time_period,
        data_time_zone: unless(r.data_time_zone, "UTC".into()),
        execute_user: r.execute_user.filter(|u| !u.is_empty()),
        retention_days: r.retention_days,
        expect_success_within_ms: r.expect_success_within_ms,
        triggers: Vec::new(),
        depends_on: Vec::new(),
    }
}

fn trigger(t: TriggerRow) -> TriggerDefinition {
    let start = t.start_time.to_jiff();
    // The start a trigger was given when made anchors the phase of an interval: written out,
    // the same fires follow wherever the document is applied.
    let schedule = match t.schedule.0 {
        ScheduleSpec::Simple {
            interval_ms,
            repeat_count,
            start_time: None,
            end_time,
        } => ScheduleSpec::Simple {
            interval_ms,
            repeat_count,
            start_time: Some(start),
            end_time,
        },
        ScheduleSpec::CalendarInterval {
            interval,
            unit,
            time_zone,
            preserve_hour_of_day_across_dst,
            skip_day_if_hour_does_not_exist,
            start_time: None,
            end_time,
        } => ScheduleSpec::CalendarInterval {
            interval,
            unit,
            time_zone,
            preserve_hour_of_day_across_dst,
            skip_day_if_hour_does_not_exist,
            start_time: Some(start),
            end_time,
        },
        other => other,
    };
    TriggerDefinition {
        group: unless(t.group_name, "default".into()),
        name: t.name,
        schedule,
        calendar: t.calendar_name,
        misfire_policy: unless(t.misfire_policy.0, MisfirePolicy::default()),
        priority: unless(t.priority, 5),
        description: unless(t.description, String::new()),
        data: unless_empty(t.data.0),
        paused: t.paused.then_some(true),
    }
}
