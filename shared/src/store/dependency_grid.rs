//! The dependency view: the graph of jobs linked by dependencies, and an Airflow-style grid of
//! those jobs, each row the job's own latest runs (a daily job's days beside an hourly job's
//! hours), each cell the status of the job's task for one data time.

use jiff::Timestamp;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Context, Store, StoreError};

/// A job in the graph.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GridJob {
    /// `group.name`.
    pub job: String,
    /// Its data-time period, if it has one.
    pub data_time_period: Option<String>,
    /// The zone its data times are taken in.
    pub data_time_zone: String,
}

/// One edge: `job` depends on `upstream`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GridEdge {
    /// The downstream job, `group.name`.
    pub job: String,
    /// The upstream job, `group.name`.
    pub upstream: String,
    /// `same` or `period`.
    pub window: String,
}

/// A job's task for a data time (its latest, if it ran more than once).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GridCell {
    /// `group.name`.
    pub job: String,
    /// The data time.
    #[schema(value_type = String, format = DateTime)]
    pub data_time: Timestamp,
    /// The task.
    pub task_id: Uuid,
    /// Its status.
    pub status: String,
}

/// The graph and the grid.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DependencyGrid {
    /// Every job with a dependency either way.
    pub jobs: Vec<GridJob>,
    /// Every dependency.
    pub edges: Vec<GridEdge>,
    /// Every data time shown, newest first.
    #[schema(value_type = Vec<String>)]
    pub data_times: Vec<Timestamp>,
    /// The grid's cells: for each job, its `columns` latest data times (before `before`).
    pub cells: Vec<GridCell>,
}

/// The graph, with a grid of each job's `columns` latest data times, before `before` if given
/// (the next page back in time).
pub async fn read(
    store: &Store,
    columns: i64,
    before: Option<Timestamp>,
) -> Result<DependencyGrid, StoreError> {
    let edges: Vec<(String, String, String)> = sqlx::query_as(
        r#"SELECT j.group_name || '.' || j.name, u.group_name || '.' || u.name, d."window"
           FROM job_dependencies d JOIN jobs j ON j.id = d.job_id
                JOIN jobs u ON u.id = d.depends_on_job_id
           ORDER BY 2, 1"#,
    )
    .fetch_all(store.pool())
    .await
    .context("reading dependencies")?;
    let jobs: Vec<(i64, String, Option<String>, String)> = sqlx::query_as(
        "SELECT id, group_name || '.' || name, data_time_period, data_time_zone FROM jobs j
         WHERE EXISTS (SELECT 1 FROM job_dependencies d
                       WHERE d.job_id = j.id OR d.depends_on_job_id = j.id)
         ORDER BY 2",
    )
    .fetch_all(store.pool())
    .await
    .context("reading the jobs with dependencies")?;
    let ids: Vec<i64> = jobs.iter().map(|(id, ..)| *id).collect();
    let labels: Vec<&str> = jobs.iter().map(|(_, job, ..)| job.as_str()).collect();
    // Each job's own latest data times, read backwards on its (job, data time) index: its latest
    // task of each.
    let cells: Vec<(String, jiff_sqlx::Timestamp, Uuid, String)> = sqlx::query_as(
        "SELECT job.label, latest.data_time, latest.id, latest.status
         FROM unnest($1::bigint[], $2::text[]) AS job(id, label),
         LATERAL (SELECT DISTINCT ON (t.data_time) t.data_time, t.id, t.status FROM tasks t
                  WHERE t.job_id = job.id AND t.data_time IS NOT NULL
                    AND ($4::timestamptz IS NULL OR t.data_time < $4)
                  ORDER BY t.data_time DESC, t.id DESC
                  LIMIT $3) latest
         ORDER BY job.label, latest.data_time DESC",
    )
    .bind(&ids)
    .bind(&labels)
    .bind(columns.clamp(1, 200))
    .bind(before.map(jiff_sqlx::Timestamp::from))
    .fetch_all(store.pool())
    .await
    .context("reading the grid")?;
    let mut data_times: Vec<Timestamp> = cells.iter().map(|(_, t, ..)| t.to_jiff()).collect();
    data_times.sort_unstable_by(|a, b| b.cmp(a));
    data_times.dedup();
    Ok(DependencyGrid {
        jobs: jobs
            .into_iter()
            .map(|(_, job, data_time_period, data_time_zone)| GridJob {
                job,
                data_time_period,
                data_time_zone,
            })
            .collect(),
        edges: edges
            .into_iter()
            .map(|(job, upstream, window)| GridEdge {
                job,
                upstream,
                window,
            })
            .collect(),
        data_times,
        cells: cells
            .into_iter()
            .map(|(job, data_time, task_id, status)| GridCell {
                job,
                data_time: data_time.to_jiff(),
                task_id,
                status,
            })
            .collect(),
    })
}
