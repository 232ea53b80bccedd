//! Tasks finished, by job and outcome (`chime_job_tasks_finished_total{job,outcome}`).
//!
//! Every task of a job that ends — on a worker, by a kill, as lost, or failed with its upstream
//! — publishes its event to `<prefix>.dependencies`, and each event is handled by one dependency
//! service, so the sum over instances counts each end (at least once: a redelivered event counts
//! again). The label is the job's `group.name`; the number of jobs bounds the series. Ad-hoc
//! tasks have no job and are not counted here (`chime_tasks_finished_total` has them by group).

use std::collections::HashMap;
use std::sync::Mutex;

use chime_core::model::{TaskEvent, TaskStatus};
use chime_core::store::{Context, Store, StoreError};

/// The outcomes counted: a task's terminal statuses.
const OUTCOMES: [TaskStatus; 3] = [
    TaskStatus::Succeeded,
    TaskStatus::Failed,
    TaskStatus::Killed,
];

/// Job labels by id, looked up once per job.
#[derive(Default)]
pub struct JobOutcomes {
    labels: Mutex<HashMap<i64, String>>,
}

impl JobOutcomes {
    /// Registers every existing job's series at zero, so an alert on a job's failures reads 0
    /// rather than "no data" before its first failure.
    pub async fn register_existing(&self, store: &Store) -> Result<(), StoreError> {
        let jobs: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, group_name || '.' || name FROM jobs")
                .fetch_all(store.pool())
                .await
                .context("reading the jobs to count")?;
        for (id, label) in jobs {
            self.remember(id, label);
        }
        Ok(())
    }

    /// Counts `event` if it is the end of a job's task.
    pub async fn count(&self, store: &Store, event: &TaskEvent) -> Result<(), StoreError> {
        let Some(job_id) = event.job_id else {
            return Ok(());
        };
        if !OUTCOMES.contains(&event.status) {
            return Ok(());
        }
        let known = self.label(job_id);
        let label = match known {
            Some(label) => label,
            None => {
                let label: Option<String> =
                    sqlx::query_scalar("SELECT group_name || '.' || name FROM jobs WHERE id = $1")
                        .bind(job_id)
                        .fetch_optional(store.pool())
                        .await
                        .context("reading the ended task's job")?;
                // A deleted job's last tasks are not counted: its label is gone.
                let Some(label) = label else {
                    return Ok(());
                };
                self.remember(job_id, label.clone());
                label
            }
        };
        metrics::counter!(
            "chime_job_tasks_finished_total",
            "job" => label,
            "outcome" => event.status.as_str()
        )
        .increment(1);
        Ok(())
    }

    fn label(&self, job_id: i64) -> Option<String> {
        self.labels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&job_id)
            .cloned()
    }

    /// Keeps the label and registers the job's series at zero.
    fn remember(&self, job_id: i64, label: String) {
        for outcome in OUTCOMES {
            metrics::counter!(
                "chime_job_tasks_finished_total",
                "job" => label.clone(),
                "outcome" => outcome.as_str()
            )
            .increment(0);
        }
        self.labels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(job_id, label);
    }
}
