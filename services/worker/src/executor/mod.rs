//! Executors: what runs a task attempt, by kind.
//!
//! Built-in kinds are `shell` and `noop`. A kind this worker has no executor for is rejected (the
//! task's reject budget decides what happens next), never failed: another worker may have it.

mod noop;
pub mod output;
mod shell;

use std::time::Duration;

use chime_core::model::{NoopSpec, ShellSpec, TaskMessage, TaskResult};
use chime_core::store::task_lifecycle::AttemptEnd;
use tokio_util::sync::CancellationToken;

/// One attempt being executed.
#[derive(Debug)]
pub struct Attempt {
    /// The task message.
    pub message: TaskMessage,
    /// Cancelled to stop the attempt early (shutdown past its grace).
    pub cancel: CancellationToken,
    /// The task's timeout.
    pub timeout: Option<Duration>,
}

impl Attempt {
    /// An attempt of `message`, cancelled by `cancel`.
    pub fn new(message: TaskMessage, cancel: CancellationToken) -> Self {
        let timeout = message
            .timeout_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
        Self {
            message,
            cancel,
            timeout,
        }
    }

    /// Resolves when the attempt's timeout has passed (never, without one).
    pub async fn deadline(&self) {
        match self.timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    }

    /// The end of an attempt that ran out of time.
    pub fn timed_out(&self, mut result: TaskResult) -> AttemptEnd {
        let ms = self.timeout.map_or(0, |t| t.as_millis());
        result.error = Some(format!("timed out after {ms} ms"));
        AttemptEnd::Failed {
            result,
            reason: "timeout",
        }
    }

    /// The end of an attempt that was stopped early.
    pub fn interrupted(&self, mut result: TaskResult) -> AttemptEnd {
        result.error = Some("interrupted: the worker stopped before the task ended".into());
        AttemptEnd::Failed {
            result,
            reason: "interrupted",
        }
    }
}

/// The executors of one worker.
#[derive(Debug, Clone)]
pub struct Executors {
    output_tail_bytes: usize,
}

impl Executors {
    /// Executors keeping `output_tail_bytes` of each task's output.
    pub fn new(output_tail_bytes: usize) -> Self {
        Self { output_tail_bytes }
    }

    /// The kinds this worker can run.
    pub fn kinds(&self) -> Vec<String> {
        vec!["shell".into(), "noop".into()]
    }

    /// Runs the attempt to its end.
    pub async fn execute(&self, attempt: &Attempt) -> AttemptEnd {
        let spec = &attempt.message.spec;
        match attempt.message.kind.as_str() {
            "shell" => match ShellSpec::parse(spec) {
                Ok(spec) => shell::run(spec, attempt, self.output_tail_bytes).await,
                Err(error) => invalid_spec(error),
            },
            "noop" => match NoopSpec::parse(spec) {
                Ok(spec) => noop::run(spec, attempt).await,
                Err(error) => invalid_spec(error),
            },
            other => AttemptEnd::Rejected {
                error: format!("this worker has no executor for kind {other:?}"),
            },
        }
    }
}

fn invalid_spec(error: impl std::fmt::Display) -> AttemptEnd {
    AttemptEnd::Failed {
        result: TaskResult {
            error: Some(error.to_string()),
            ..TaskResult::default()
        },
        reason: "error",
    }
}
