//! The dependency view: the graph of jobs linked by dependencies, and an Airflow-style grid of
//! those jobs × their latest data times, each cell the status of the job's task for that time.

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
    /// The grid's columns: the latest data times of those jobs, newest first.
    #[schema(value_type = Vec<String>)]
    pub data_times: Vec<Timestamp>,
    /// The grid's cells.
    pub cells: Vec<GridCell>,
}

/// The graph, with a grid of the `columns` latest data times.
pub async fn read(store: &Store, columns: i64) -> Result<DependencyGrid, StoreError> {
    let edges: Vec<(String, String, String)> = sqlx::query_as(
        r#"SELECT j.group_name || '.' || j.name, u.group_name || '.' || u.name, d."window"
           FROM job_dependencies d JOIN jobs j ON j.id = d.job_id
                JOIN jobs u ON u.id = d.depends_on_job_id
           ORDER BY 2, 1"#,
    )
    .fetch_all(store.pool())
    .await
    .context("reading dependencies")?;
    let jobs: Vec<(i64, String, Option<String>)> = sqlx::query_as(
        "SELECT id, group_name || '.' || name, data_time_period FROM jobs j
         WHERE EXISTS (SELECT 1 FROM job_dependencies d
                       WHERE d.job_id = j.id OR d.depends_on_job_id = j.id)
         ORDER BY 2",
    )
    .fetch_all(store.pool())
    .await
    .context("reading the jobs with dependencies")?;
    let ids: Vec<i64> = jobs.iter().map(|(id, _, _)| *id).collect();
    // The latest data times, each job's read backwards on its (job, data time) index.
    let data_times: Vec<jiff_sqlx::Timestamp> = sqlx::query_scalar(
        "SELECT DISTINCT d FROM unnest($1::bigint[]) AS job(id),
             LATERAL (SELECT DISTINCT data_time AS d FROM tasks
                      WHERE job_id = job.id AND data_time IS NOT NULL
                      ORDER BY data_time DESC LIMIT $2) latest
         ORDER BY d DESC LIMIT $2",
    )
    .bind(&ids)
    .bind(columns.clamp(1, 200))
    .fetch_all(store.pool())
    .await
    .context("reading the latest data times")?;
    let cells: Vec<(String, jiff_sqlx::Timestamp, Uuid, String)> = sqlx::query_as(
        "SELECT DISTINCT ON (t.job_id, t.data_time) j.group_name || '.' || j.name,
                t.data_time, t.id, t.status
         FROM tasks t JOIN jobs j ON j.id = t.job_id
         WHERE t.job_id = ANY($1) AND t.data_time = ANY($2)
         ORDER BY t.job_id, t.data_time, t.id DESC",
    )
    .bind(&ids)
    .bind(&data_times)
    .fetch_all(store.pool())
    .await
    .context("reading the grid")?;
    Ok(DependencyGrid {
        jobs: jobs
            .into_iter()
            .map(|(_, job, data_time_period)| GridJob {
                job,
                data_time_period,
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
        data_times: data_times.into_iter().map(|t| t.to_jiff()).collect(),
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
