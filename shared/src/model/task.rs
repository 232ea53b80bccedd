//! Tasks and their attempts: statuses, outcomes, and the shapes the API and CLI show.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// Where a task is in its lifecycle (see `store::task_lifecycle` for the transitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Dependencies not yet met.
    Waiting,
    /// Published (or about to be) to its worker group's queue.
    Ready,
    /// A worker runs the current attempt.
    Running,
    /// A rejected or failed attempt waits for `next_attempt_at`.
    Retrying,
    /// Terminal: the last attempt succeeded.
    Succeeded,
    /// Terminal: out of budget, or failed for good.
    Failed,
    /// Terminal: killed on request.
    Killed,
}

impl TaskStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [TaskStatus; 7] = [
        Self::Waiting,
        Self::Ready,
        Self::Running,
        Self::Retrying,
        Self::Succeeded,
        Self::Failed,
        Self::Killed,
    ];

    /// The name used in the database, the API and routing keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Ready => "ready",
            Self::Running => "running",
            Self::Retrying => "retrying",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Killed => "killed",
        }
    }

    /// Whether the task can no longer change on its own.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Killed)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no task status.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown task status {0:?} (expected one of waiting, ready, running, retrying, succeeded, failed, killed)"
)]
pub struct UnknownStatus(pub String);

impl FromStr for TaskStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

/// How one attempt of a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The worker could not take it (uses the reject budget).
    Rejected,
    /// It ran and failed (uses the failed budget).
    Failed,
    /// It ran and succeeded.
    Succeeded,
    /// It was killed on request.
    Killed,
    /// Its worker vanished while it ran.
    Lost,
}

impl AttemptOutcome {
    /// The name used in the database and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::Failed => "failed",
            Self::Succeeded => "succeeded",
            Self::Killed => "killed",
            Self::Lost => "lost",
        }
    }
}

/// What an attempt produced: the executor's exit code, the tail of its output, its error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskResult {
    /// Process exit code (shell) or HTTP status (http).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The last bytes of stdout and stderr, interleaved as written.
    #[serde(default)]
    pub output: String,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The task's result value: the JSON a shell task wrote to `$CHIME_RESULT_FILE`, or an http
    /// task's response body when it is JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub value: Option<serde_json::Value>,
}

/// The job a task belongs to, as shown with the task.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobRef {
    /// The job's id.
    pub id: i64,
    /// Its group.
    pub group: String,
    /// Its name.
    pub name: String,
    /// The IANA zone its data times are taken in (its period's zone; UTC by default): where a
    /// data time is shown.
    #[serde(default = "utc_zone")]
    pub data_time_zone: String,
}

fn utc_zone() -> String {
    "UTC".into()
}

/// One attempt of a task, as shown by `chime task show`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttemptView {
    /// 1 for the first attempt.
    pub attempt: i32,
    /// None while the attempt runs.
    pub outcome: Option<AttemptOutcome>,
    /// The name of the worker that ran it.
    pub worker: Option<String>,
    /// When the worker took it.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Timestamp,
    /// When it ended.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Timestamp>,
    /// Exit code of the attempt, when it ran a process.
    pub exit_code: Option<i32>,
    /// Why it did not succeed.
    pub error: Option<String>,
    /// The tail of its output (stdout and stderr interleaved); while it runs, what the worker has
    /// written so far (about once a second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Its result value (see [`TaskResult::value`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub value: Option<serde_json::Value>,
}

/// A task as the API returns it and `chime task show --json` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskView {
    /// The task's id.
    pub id: Uuid,
    /// Where it is in its lifecycle.
    pub status: TaskStatus,
    /// The current (or last) attempt, from 1.
    pub attempt: i32,
    /// The job it runs, if any (inline ad-hoc tasks have none).
    pub job: Option<JobRef>,
    /// Its label, if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The executor kind.
    pub kind: String,
    /// The worker group it is routed to.
    pub group: String,
    /// The executor's input.
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// The task's data.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// The data time it runs for.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<Timestamp>,
    /// Priority (higher first).
    pub priority: i32,
    /// Timeout of one attempt.
    pub timeout_ms: Option<i64>,
    /// Why it ended as it did.
    pub reason: Option<String>,
    /// When it was created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When its current attempt started.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Timestamp>,
    /// When it reached a terminal status.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Timestamp>,
    /// When a retrying task is released again.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_attempt_at: Option<Timestamp>,
    /// What the last attempt produced.
    pub result: Option<TaskResult>,
    /// Every attempt so far (empty in lists).
    pub attempts: Vec<AttemptView>,
    /// What a `waiting` task still waits for (shown for one task, empty in lists).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_on: Vec<UnmetDependency>,
    /// Why a task that has not ended is not running (shown for one task): no worker online in
    /// its group, every slot of its group busy with tasks queued ahead of it, the time its retry
    /// is due, no dependency service to advance it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalled: Vec<String>,
    /// The backfill the task belongs to or descends from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill_id: Option<i64>,
}

/// A task as lists show it: what it is and where it stands, without its spec, data or output
/// (those are in [`TaskView`], one task at a time), so a list's size is bounded by its length.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskSummary {
    /// The task's id.
    pub id: Uuid,
    /// Where it is in its lifecycle.
    pub status: TaskStatus,
    /// The current (or last) attempt, from 1.
    pub attempt: i32,
    /// The job it runs, if any.
    pub job: Option<JobRef>,
    /// The executor kind.
    pub kind: String,
    /// The worker group it is routed to.
    pub group: String,
    /// The data time it runs for.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<Timestamp>,
    /// Priority (higher first).
    pub priority: i32,
    /// Who submitted it.
    pub submit_user: Option<String>,
    /// Its label, if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For an ad-hoc shell task, the start of its command (its script, or its arguments joined
    /// by spaces; at most 80 characters), so that a list says what it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Why it ended as it did.
    pub reason: Option<String>,
    /// The last attempt's exit code.
    pub exit_code: Option<i32>,
    /// When it was created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When its current attempt started.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Timestamp>,
    /// When it reached a terminal status.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Timestamp>,
}

/// One upstream run a waiting task still needs (`chime task show`, the task's API view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UnmetDependency {
    /// The upstream job, `group.name` (or the backfill holding the task back).
    pub upstream: String,
    /// The upstream data time needed, when known.
    #[schema(value_type = Option<String>)]
    pub data_time: Option<Timestamp>,
    /// Where that run is: `missing` (not created yet, and why none is coming when its job or
    /// triggers are paused), a task status, or why else it waits.
    pub state: String,
    /// The upstream run's task, when one exists (the dashboard links it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Uuid>,
}
