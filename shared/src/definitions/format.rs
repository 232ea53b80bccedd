//! The definitions file format: what `chime apply` reads, `chime export` writes and `chime schema`
//! describes. Its fields are the API's own (`kind`, `spec`, `worker_group`, `schedule: {kind:
//! cron, …}`, `misfire_policy`, …), so what a user knows from the API and the `--json` outputs
//! carries over; a job holds its triggers and what it depends on. Every object refuses a field it
//! does not know, naming it, rather than ignoring a typo.
//!
//! ```yaml
//! worker_groups:
//!   - name: etl
//! calendars:
//!   - name: holidays
//!     definition: {kind: annual, excluded_days: ["12-25"]}
//! jobs:
//!   - name: 日报
//!     group: reports
//!     kind: shell
//!     spec: {command: [./report.sh]}
//!     worker_group: etl
//!     data_time_period: day
//!     triggers:
//!       - name: nightly
//!         schedule: {kind: cron, cron: "0 0 2 * * ?", time_zone: Asia/Shanghai}
//!         calendar: holidays
//!     depends_on:
//!       - job: ingest.raw
//! ```

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::Backoff;
use crate::schedule::ScheduleSpec;
use crate::schedule::misfire::MisfirePolicy;
use crate::store::calendars::NamedCalendar;
use crate::store::dependencies::{OnUpstreamFailure, Window};
use crate::store::jobs::{DEFAULT_PRIORITY, DEFAULT_RETRY_INTERVAL_MS, NewJob};
use crate::store::kind_routes::KindRoute;
use crate::store::triggers::NewTrigger;
use crate::store::worker_groups::NewWorkerGroup;

/// One document of a definitions file, or everything several documents hold. Each list is
/// optional; the order of objects in a file carries no meaning.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Definitions {
    /// Worker groups to declare.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_groups: Vec<NewWorkerGroup>,
    /// Job kinds and the worker group each goes to by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<KindRoute>,
    /// Exclusion calendars, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calendars: Vec<NamedCalendar>,
    /// Jobs, each with its triggers and dependencies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobDefinition>,
}

impl Definitions {
    /// Adds everything `other` holds after what this holds.
    pub fn extend(&mut self, other: Definitions) {
        self.worker_groups.extend(other.worker_groups);
        self.routes.extend(other.routes);
        self.calendars.extend(other.calendars);
        self.jobs.extend(other.jobs);
    }

    /// How many objects it holds (worker groups, routes, calendars, jobs, triggers and
    /// dependencies).
    pub fn len(&self) -> usize {
        self.worker_groups.len()
            + self.routes.len()
            + self.calendars.len()
            + self
                .jobs
                .iter()
                .map(|j| 1 + j.triggers.len() + j.depends_on.len())
                .sum::<usize>()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A job as a file holds it: the fields `POST /api/v1/jobs` takes, its triggers and what it
/// depends on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobDefinition {
    /// Its group (default `default`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::model::names::deserialize_nfc_opt"
    )]
    pub group: Option<String>,
    /// Its name, in any language.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub name: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its kind: shell, http, noop or a worker's command template.
    pub kind: String,
    /// What it runs (the kind's spec).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// The worker group its tasks go to (default: its kind's route, else `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_group: Option<String>,
    /// Its tasks' priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Whether two of its tasks may run at once (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent: Option<bool>,
    /// Whether a task lost with its worker runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_recovery: Option<bool>,
    /// The job's data (every task's data starts from it).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// Retries after a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject_retries: Option<i32>,
    /// Wait before a rejected task runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject_interval_ms: Option<i64>,
    /// Retries after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_retries: Option<i32>,
    /// Wait before a failed task runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_interval_ms: Option<i64>,
    /// How the failed interval grows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// Timeout of one attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// minute, hour, day, week or month: data times are truncated to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_time_period: Option<String>,
    /// The zone the data-time period is taken in (default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_time_zone: Option<String>,
    /// The OS user its commands run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute_user: Option<String>,
    /// Keep its ended tasks this many days (default: the installation's retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<i32>,
    /// Tell the webhooks when it has not succeeded for this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_success_within_ms: Option<i64>,
    /// Its triggers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<TriggerDefinition>,
    /// The jobs it depends on: it runs for a data time once they succeeded for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyDefinition>,
}

impl JobDefinition {
    /// Its group, `default` when none is given.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or("default")
    }

    /// `group.name`, as the CLI and the dependencies name a job.
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.group(), self.name)
    }

    /// The job with every setting that holds the API's default left out (and its triggers and
    /// dependencies likewise), as the store would give it back: two definitions of one job
    /// compare equal once normalized whether they spell defaults out or not.
    pub fn normalized(self) -> Self {
        JobDefinition {
            group: unless(self.group, "default".into()),
            description: unless(self.description, String::new()),
            spec: unless_empty(self.spec),
            priority: unless(self.priority, DEFAULT_PRIORITY),
            concurrent: unless(self.concurrent, true),
            requests_recovery: unless(self.requests_recovery, false),
            data: unless_empty(self.data),
            reject_retries: unless(self.reject_retries, 0),
            reject_interval_ms: unless(self.reject_interval_ms, DEFAULT_RETRY_INTERVAL_MS),
            failed_retries: unless(self.failed_retries, 0),
            failed_interval_ms: unless(self.failed_interval_ms, DEFAULT_RETRY_INTERVAL_MS),
            backoff: unless(self.backoff, Backoff::default()),
            data_time_zone: unless(self.data_time_zone, "UTC".into()),
            execute_user: unless(self.execute_user, String::new()),
            triggers: self
                .triggers
                .into_iter()
                .map(TriggerDefinition::normalized)
                .collect(),
            depends_on: self
                .depends_on
                .into_iter()
                .map(DependencyDefinition::normalized)
                .collect(),
            ..self
        }
    }

    /// The job as the API takes it (without its triggers and dependencies).
    pub fn new_job(&self) -> NewJob {
        NewJob {
            group: self.group.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            kind: self.kind.clone(),
            spec: self.spec.clone(),
            worker_group: self.worker_group.clone(),
            priority: self.priority,
            concurrent: self.concurrent,
            requests_recovery: self.requests_recovery,
            data: self.data.clone(),
            reject_retries: self.reject_retries,
            reject_interval_ms: self.reject_interval_ms,
            failed_retries: self.failed_retries,
            failed_interval_ms: self.failed_interval_ms,
            backoff: self.backoff.clone(),
            timeout_ms: self.timeout_ms,
            data_time_period: self.data_time_period.clone(),
            data_time_zone: self.data_time_zone.clone(),
            execute_user: self.execute_user.clone(),
            retention_days: self.retention_days,
            expect_success_within_ms: self.expect_success_within_ms,
        }
    }
}

/// A trigger of a job, as a file holds it: the fields `POST /api/v1/triggers` takes, less the
/// job (the one that holds it), and whether it is paused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerDefinition {
    /// Its group (default `default`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::model::names::deserialize_nfc_opt"
    )]
    pub group: Option<String>,
    /// Its name.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub name: String,
    /// When it fires.
    pub schedule: ScheduleSpec,
    /// The calendar whose times it skips.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::model::names::deserialize_nfc_opt"
    )]
    pub calendar: Option<String>,
    /// What to do with a fire it missed (default `smart`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire_policy: Option<MisfirePolicy>,
    /// Which of two triggers due at once fires first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Data its tasks start with (over the job's).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// Paused. An apply sets it only when it changed in the files since the source's last
    /// apply, so an operator's pause is not undone by the next deploy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

impl TriggerDefinition {
    /// Its group, `default` when none is given.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or("default")
    }

    /// The trigger with every setting that holds the API's default left out.
    pub fn normalized(self) -> Self {
        TriggerDefinition {
            group: unless(self.group, "default".into()),
            misfire_policy: unless(self.misfire_policy, MisfirePolicy::default()),
            priority: unless(self.priority, DEFAULT_PRIORITY),
            description: unless(self.description, String::new()),
            data: unless_empty(self.data),
            paused: unless(self.paused, false),
            ..self
        }
    }

    /// The trigger as the API takes it, for `job`.
    pub fn new_trigger(&self, job: &JobDefinition) -> NewTrigger {
        NewTrigger {
            group: self.group.clone(),
            name: self.name.clone(),
            job_group: job.group.clone(),
            job: job.name.clone(),
            schedule: self.schedule.clone(),
            calendar: self.calendar.clone(),
            misfire_policy: self.misfire_policy,
            priority: self.priority,
            description: self.description.clone(),
            data: self.data.clone(),
        }
    }
}

/// What a job depends on, as a file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DependencyDefinition {
    /// The upstream job: `group.name`, or its name when in the default group.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub job: String,
    /// Which of its runs a data time needs (default `same`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// What to do when it failed for good (default `fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_upstream_failure: Option<OnUpstreamFailure>,
}

impl DependencyDefinition {
    /// The dependency with a default window and failure policy left out.
    pub fn normalized(self) -> Self {
        DependencyDefinition {
            window: unless(self.window, Window::default()),
            on_upstream_failure: unless(self.on_upstream_failure, OnUpstreamFailure::default()),
            ..self
        }
    }
}

/// `value`, unless it is `default`.
fn unless<T: PartialEq>(value: Option<T>, default: T) -> Option<T> {
    value.filter(|v| *v != default)
}

/// An empty object, or null, as nothing: the API stores no spec or data as `{}`.
fn unless_empty(value: serde_json::Value) -> serde_json::Value {
    if value.as_object().is_some_and(|o| o.is_empty()) {
        serde_json::Value::Null
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field added to the API's job must be added to the file's: every field of a job as
    /// the API takes it is a field of the file's job, under the same name.
    #[test]
    fn a_job_in_a_file_has_every_field_the_api_takes() {
        let api = serde_json::to_value(NewJob::default()).unwrap_or_default();
        let file = JobDefinition {
            group: Some(String::new()),
            description: Some(String::new()),
            spec: serde_json::json!({}),
            worker_group: Some(String::new()),
            priority: Some(0),
            concurrent: Some(true),
            requests_recovery: Some(true),
            data: serde_json::json!({}),
            reject_retries: Some(0),
            reject_interval_ms: Some(0),
            failed_retries: Some(0),
            failed_interval_ms: Some(0),
            backoff: Some(Backoff::default()),
            timeout_ms: Some(0),
            data_time_period: Some(String::new()),
            data_time_zone: Some(String::new()),
            execute_user: Some(String::new()),
            retention_days: Some(0),
            expect_success_within_ms: Some(0),
            ..JobDefinition::default()
        };
        let file = serde_json::to_value(file).unwrap_or_default();
        let (Some(api), Some(file)) = (api.as_object(), file.as_object()) else {
            panic!("both serialize as objects");
        };
        for field in api.keys() {
            assert!(file.contains_key(field), "the file's job lacks `{field}`");
        }
    }
}
