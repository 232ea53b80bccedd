//! Failure notifications: webhooks (for every task, or one job's) and their deliveries.
//!
//! ```text
//!   task → failed (any path; a trigger on `tasks`, same transaction)
//!   job's success window missed (a scheduler's check, [`notify_overdue`], once per deadline)
//!     └─▶ webhook_deliveries row per matching webhook ──due──▶ claimed by a scheduler
//!           ──POST 2xx──▶ delivered      ──error / non-2xx──▶ retried (1 s, 2 s, 4 s … 10 min)
//! ```
//!
//! A delivery is claimed by moving its next attempt past the request's timeout before the POST,
//! in its own short transaction, so no lock is held across the network and an instance that dies
//! mid-request lets another retry it. A receiver may therefore see a delivery twice (at least
//! once): the body's `task_id` and `attempt` identify it.

use serde::{Deserialize, Serialize};
use sqlx::FromRow;
use utoipa::ToSchema;

use super::{Context, Store, StoreError};

/// A webhook as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, FromRow)]
pub struct WebhookView {
    /// Its id.
    pub id: i64,
    /// The job it is for, `group.name` (None: every task).
    pub job: Option<String>,
    /// Where it is POSTed.
    pub url: String,
    /// Deliveries made.
    pub delivered: i64,
    /// Deliveries still being tried.
    pub pending: i64,
}

/// A webhook as the API takes it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where to POST: an http or https URL.
    pub url: String,
    /// Only this job's failures (`group.name`, the split that names an existing job, or `name`
    /// in the default group); every task's without it.
    #[serde(default)]
    pub job: Option<String>,
    /// The job's group, for a group with a dot in it: `job` is then the name alone.
    #[serde(default)]
    pub job_group: Option<String>,
}

/// A delivery claimed for one try.
#[derive(Debug, Clone, FromRow)]
pub struct Delivery {
    /// Its id.
    pub id: i64,
    /// Where to POST.
    pub url: String,
    /// What to POST.
    pub body: sqlx::types::Json<serde_json::Value>,
    /// Tries so far, this one included.
    pub attempts: i32,
}

/// How long a claimed delivery stays claimed: longer than a request may take.
pub const CLAIM_SECONDS: f64 = 30.0;

/// Adds a webhook.
pub async fn add(store: &Store, hook: &NewWebhook) -> Result<WebhookView, StoreError> {
    let url = checked_url(&hook.url)?;
    let job_id: Option<i64> = match &hook.job {
        None if hook.job_group.is_some() => {
            return Err(StoreError::Invalid(
                "job_group: give job (the job's name) with it".into(),
            ));
        }
        None => None,
        Some(job) => {
            let found = match &hook.job_group {
                Some(_) => Vec::new(),
                None => super::jobs::find_dotted(store, job).await?,
            };
            if found.len() > 1 {
                return Err(StoreError::Invalid(format!(
                    "job: {job:?} names {} jobs (its dots split it several ways): give the \
                         group apart (--job-group, or job_group)",
                    found.len()
                )));
            }
            let (group, name) = match (&hook.job_group, found.first()) {
                (Some(group), _) => (group.as_str(), job.as_str()),
                (None, Some((group, name))) => (group.as_str(), name.as_str()),
                (None, None) => job.split_once('.').unwrap_or(("default", job.as_str())),
            };
            let id: Option<i64> =
                sqlx::query_scalar("SELECT id FROM jobs WHERE group_name = $1 AND name = $2")
                    .bind(group)
                    .bind(name)
                    .fetch_optional(store.pool())
                    .await
                    .context("looking up the webhook's job")?;
            Some(id.ok_or_else(|| StoreError::Invalid(format!("job: no job {group}.{name}")))?)
        }
    };
    let id: i64 =
        sqlx::query_scalar("INSERT INTO webhooks (job_id, url) VALUES ($1, $2) RETURNING id")
            .bind(job_id)
            .bind(url)
            .fetch_one(store.pool())
            .await
            .context("adding the webhook")?;
    list(store)
        .await?
        .into_iter()
        .find(|w| w.id == id)
        .ok_or_else(|| StoreError::NotFound(format!("webhook {id}")))
}

/// The URL, if it is one a webhook may have: http or https, with a host, no NUL.
fn checked_url(url: &str) -> Result<&str, StoreError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| StoreError::Invalid(format!("url {url:?}: use an http or https URL")))?;
    if rest.is_empty() || rest.starts_with('/') || url.contains('\0') || url.len() > 2000 {
        return Err(StoreError::Invalid(format!(
            "url {url:?}: give a host, as in https://alerts.example.com/chime"
        )));
    }
    Ok(url)
}

/// Every webhook, with its delivery counts.
pub async fn list(store: &Store) -> Result<Vec<WebhookView>, StoreError> {
    sqlx::query_as(
        "SELECT w.id, j.group_name || '.' || j.name AS job, w.url,
                count(d.id) FILTER (WHERE d.delivered_at IS NOT NULL) AS delivered,
                count(d.id) FILTER (WHERE d.id IS NOT NULL AND d.delivered_at IS NULL) AS pending
         FROM webhooks w LEFT JOIN jobs j ON j.id = w.job_id
         LEFT JOIN webhook_deliveries d ON d.webhook_id = w.id
         GROUP BY w.id, j.group_name, j.name ORDER BY w.id",
    )
    .fetch_all(store.pool())
    .await
    .context("listing webhooks")
}

/// Removes a webhook and its deliveries.
pub async fn delete(store: &Store, id: i64) -> Result<(), StoreError> {
    let done = sqlx::query("DELETE FROM webhooks WHERE id = $1")
        .bind(id)
        .execute(store.pool())
        .await
        .context("deleting the webhook")?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("webhook {id}")));
    }
    Ok(())
}

/// The longest success window a job may have: ten years.
pub const MAX_SUCCESS_WINDOW_MS: i64 = 10 * 365 * 86_400_000;

/// Writes a `job.success_overdue` delivery, for each of its webhooks and every global one, for
/// each job whose latest success (or, before its first, the setting of its window) is older than
/// its `expect_success_within_ms`, once per missed deadline: the deadline notified is recorded
/// on the job in the same statement, so two schedulers checking at once notify it once. The
/// latest success is that of the job's newest run (as `chime_job_last_success_timestamp_seconds`
/// has it), and the latest one seen is kept on the job, so a rerun in flight or a pruned row does
/// not move the deadline back. Returns how many jobs were found overdue.
pub async fn notify_overdue(store: &Store) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    sqlx::query(
        "UPDATE jobs j SET last_success_seen = s.finished_at
         FROM jobs w
         CROSS JOIN LATERAL (
             SELECT t.finished_at FROM tasks t
             WHERE t.job_id = w.id AND t.status = 'succeeded'
             ORDER BY t.data_time DESC LIMIT 1
         ) s
         WHERE j.id = w.id AND w.expect_success_within_ms IS NOT NULL
           AND s.finished_at > coalesce(j.last_success_seen, '-infinity')",
    )
    .execute(&mut *tx)
    .await
    .context("reading the jobs' latest successes")?;
    let overdue: i64 = sqlx::query_scalar(
        "WITH due AS (
             SELECT id, group_name || '.' || name AS job, expect_success_within_ms,
                    last_success_seen AS last_success,
                    coalesce(last_success_seen, expect_success_since)
                        + expect_success_within_ms * interval '1 millisecond' AS deadline
             FROM jobs
             WHERE expect_success_within_ms IS NOT NULL
         ), overdue AS (
             UPDATE jobs j SET success_overdue_notified = due.deadline
             FROM due
             WHERE j.id = due.id AND due.deadline <= now()
               AND j.success_overdue_notified IS DISTINCT FROM due.deadline
             RETURNING j.id, due.job, due.deadline, due.last_success,
                       due.expect_success_within_ms
         ), sent AS (
             INSERT INTO webhook_deliveries (webhook_id, body)
             SELECT w.id, jsonb_build_object(
                        'v', 1, 'event', 'job.success_overdue', 'job', o.job,
                        'expect_success_within_ms', o.expect_success_within_ms,
                        'last_success_at', o.last_success, 'deadline', o.deadline, 'at', now())
             FROM overdue o JOIN webhooks w ON w.job_id IS NULL OR w.job_id = o.id
             RETURNING 1
         )
         SELECT count(*) FROM overdue",
    )
    .fetch_one(&mut *tx)
    .await
    .context("notifying missed success windows")?;
    tx.commit()
        .await
        .context("committing the success-window check")?;
    Ok(overdue)
}

/// Claims up to `limit` due deliveries for one try each (see the module's comment).
pub async fn claim_due(store: &Store, limit: i64) -> Result<Vec<Delivery>, StoreError> {
    sqlx::query_as(
        "UPDATE webhook_deliveries d
         SET attempts = d.attempts + 1,
             next_attempt_at = now() + make_interval(secs => $2)
         FROM (SELECT id FROM webhook_deliveries
               WHERE delivered_at IS NULL AND next_attempt_at <= now()
               ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED) due,
              webhooks w
         WHERE d.id = due.id AND w.id = d.webhook_id
         RETURNING d.id, w.url, d.body, d.attempts",
    )
    .bind(limit)
    .bind(CLAIM_SECONDS)
    .fetch_all(store.pool())
    .await
    .context("claiming webhook deliveries")
}

/// Records a try: delivered, or to be tried again after a backoff that doubles from 1 s up to
/// 10 minutes.
pub async fn record(
    store: &Store,
    id: i64,
    attempts: i32,
    error: Option<&str>,
) -> Result<(), StoreError> {
    let backoff = 2f64.powi(attempts.saturating_sub(1).min(20)).min(600.0);
    sqlx::query(
        "UPDATE webhook_deliveries
         SET delivered_at = CASE WHEN $2::text IS NULL THEN now() END,
             last_error = $2,
             next_attempt_at = CASE WHEN $2::text IS NULL THEN next_attempt_at
                                    ELSE now() + make_interval(secs => $3) END
         WHERE id = $1",
    )
    .bind(id)
    .bind(error)
    .bind(backoff)
    .execute(store.pool())
    .await
    .context("recording a webhook delivery")?;
    Ok(())
}
