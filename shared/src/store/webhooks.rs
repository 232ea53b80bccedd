//! Failure notifications: webhooks (for every task, or one job's) and their deliveries.
//!
//! ```text
//!   task → failed (any path; a trigger on `tasks`, same transaction)
//!   job's success window missed (a scheduler's check, [`notify_overdue`], once per deadline)
//!     └─▶ webhook_deliveries row per matching webhook ──due──▶ claimed by a scheduler
//!           ──POST 2xx──▶ delivered      ──error / non-2xx──▶ retried (1 s, 2 s, 4 s … 10 min)
//!                                            ──the 15th failed try──▶ given up (kept, shown)
//! ```
//!
//! A scheduler has a bounded number of deliveries in flight, and at most a few per webhook
//! ([`claim_due`]), so a receiver that hangs delays only its own. Delivered and given-up
//! deliveries are removed by retention with the task history (`retention.rs`).
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
    /// Deliveries given up after [`MAX_ATTEMPTS`] tries.
    pub gave_up: i64,
    /// The newest failed try's error (the URL's secrets never in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
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
    /// Its webhook (the receiver).
    pub webhook_id: i64,
}

/// How many times a delivery is tried before it is given up: with the backoff (1 s doubling to
/// 10 minutes between tries), about an hour of a receiver's outage.
pub const MAX_ATTEMPTS: i32 = 15;

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

/// The URL, if it is one a webhook may have: an http or https URL that parses, with a host, no
/// NUL, at most 2,000 bytes. The error shows it without its secrets.
fn checked_url(url: &str) -> Result<&str, StoreError> {
    let shown = crate::redact::http_url(url);
    let parsed = url::Url::parse(url)
        .map_err(|e| StoreError::Invalid(format!("url {shown}: not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(StoreError::Invalid(format!(
            "url {shown}: use an http or https URL"
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) || url.contains('\0') || url.len() > 2000 {
        return Err(StoreError::Invalid(format!(
            "url {shown}: give a host, as in https://alerts.example.com/chime"
        )));
    }
    Ok(url)
}

/// Every webhook, with its delivery counts.
pub async fn list(store: &Store) -> Result<Vec<WebhookView>, StoreError> {
    sqlx::query_as(
        "SELECT w.id, j.group_name || '.' || j.name AS job, w.url,
                count(d.id) FILTER (WHERE d.delivered_at IS NOT NULL) AS delivered,
                count(d.id) FILTER (WHERE d.id IS NOT NULL AND d.delivered_at IS NULL
                                      AND d.gave_up_at IS NULL) AS pending,
                count(d.id) FILTER (WHERE d.gave_up_at IS NOT NULL) AS gave_up,
                (SELECT e.last_error FROM webhook_deliveries e
                 WHERE e.webhook_id = w.id AND e.last_error IS NOT NULL AND e.delivered_at IS NULL
                 ORDER BY e.id DESC LIMIT 1) AS last_error
         FROM webhooks w LEFT JOIN jobs j ON j.id = w.job_id
         LEFT JOIN webhook_deliveries d ON d.webhook_id = w.id
         GROUP BY w.id, j.group_name, j.name ORDER BY w.id",
    )
    .fetch_all(store.pool())
    .await
    .context("listing webhooks")
    .map(|hooks: Vec<WebhookView>| {
        // A receiver's URL may carry its secret; it is kept, and used, but not shown.
        hooks
            .into_iter()
            .map(|h| WebhookView {
                url: crate::redact::http_url(&h.url),
                ..h
            })
            .collect()
    })
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

/// Claims up to `limit` due deliveries for one try each (see the module's comment), at most
/// `per_receiver` in flight for each webhook, counting `busy`: the deliveries this caller still
/// has in flight, by webhook. So a receiver that hangs holds at most its own share of the
/// caller's slots, and the others' deliveries go on.
pub async fn claim_due(
    store: &Store,
    limit: i64,
    per_receiver: i64,
    busy: &[(i64, i64)],
) -> Result<Vec<Delivery>, StoreError> {
    let (busy_hooks, busy_counts): (Vec<i64>, Vec<i64>) = busy.iter().copied().unzip();
    sqlx::query_as(
        "UPDATE webhook_deliveries d
         SET attempts = d.attempts + 1,
             next_attempt_at = now() + make_interval(secs => $2)
         FROM (SELECT id FROM webhook_deliveries
               WHERE id IN (
                   SELECT c.id FROM (
                       SELECT x.id, x.next_attempt_at,
                              row_number() OVER (PARTITION BY x.webhook_id
                                                 ORDER BY x.next_attempt_at, x.id) AS n,
                              coalesce(b.n, 0) AS busy
                       FROM webhook_deliveries x
                       LEFT JOIN unnest($3::bigint[], $4::bigint[]) AS b(webhook_id, n)
                              ON b.webhook_id = x.webhook_id
                       WHERE x.delivered_at IS NULL AND x.gave_up_at IS NULL
                         AND x.next_attempt_at <= now()
                   ) c
                   WHERE c.n <= $5 - c.busy
                   ORDER BY c.next_attempt_at LIMIT $1)
               FOR UPDATE SKIP LOCKED) due,
              webhooks w
         WHERE d.id = due.id AND w.id = d.webhook_id
           AND d.delivered_at IS NULL AND d.gave_up_at IS NULL AND d.next_attempt_at <= now()
         RETURNING d.id, w.url, d.body, d.attempts, d.webhook_id",
    )
    .bind(limit)
    .bind(CLAIM_SECONDS)
    .bind(&busy_hooks)
    .bind(&busy_counts)
    .bind(per_receiver)
    .fetch_all(store.pool())
    .await
    .context("claiming webhook deliveries")
}

/// What [`record`] made of a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryOutcome {
    /// The receiver answered 2xx.
    Delivered,
    /// It failed; the delivery is tried again after its backoff.
    Retrying,
    /// It failed for the [`MAX_ATTEMPTS`]th time: the delivery is given up.
    GaveUp,
}

/// Records a try: delivered, or to be tried again after a backoff that doubles from 1 s up to
/// 10 minutes, or, after [`MAX_ATTEMPTS`] tries, given up. `error` must show no secret of the
/// URL (it is kept and shown by `webhook list`).
pub async fn record(
    store: &Store,
    id: i64,
    attempts: i32,
    error: Option<&str>,
) -> Result<TryOutcome, StoreError> {
    let backoff = 2f64.powi(attempts.saturating_sub(1).min(20)).min(600.0);
    let give_up = error.is_some() && attempts >= MAX_ATTEMPTS;
    sqlx::query(
        "UPDATE webhook_deliveries
         SET delivered_at = CASE WHEN $2::text IS NULL THEN now() END,
             last_error = $2,
             gave_up_at = CASE WHEN $4 THEN now() END,
             next_attempt_at = CASE WHEN $2::text IS NULL OR $4 THEN next_attempt_at
                                    ELSE now() + make_interval(secs => $3) END
         WHERE id = $1 AND attempts = $5 AND delivered_at IS NULL AND gave_up_at IS NULL",
    )
    .bind(id)
    .bind(error)
    .bind(backoff)
    .bind(give_up)
    // Only this try's claim: a try that outlived its claim must not undo a later one's delivery.
    .bind(attempts)
    .execute(store.pool())
    .await
    .context("recording a webhook delivery")?;
    Ok(match (error, give_up) {
        (None, _) => TryOutcome::Delivered,
        (Some(_), false) => TryOutcome::Retrying,
        (Some(_), true) => TryOutcome::GaveUp,
    })
}
