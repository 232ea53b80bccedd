//! The `noop` kind: succeeds, optionally after sleeping. For tests and benchmarks.

use std::time::Duration;

use chime_core::model::{NoopSpec, TaskResult};
use chime_core::store::task_lifecycle::AttemptEnd;

use super::Attempt;

/// Sleeps `sleep_ms` (interrupted by a kill or the timeout), then succeeds.
pub async fn run(spec: NoopSpec, attempt: &Attempt) -> AttemptEnd {
    if spec.sleep_ms > 0 {
        let sleep = tokio::time::sleep(Duration::from_millis(spec.sleep_ms));
        tokio::select! {
            _ = sleep => {}
            _ = attempt.cancel.cancelled() => return attempt.interrupted(TaskResult::default()),
            _ = attempt.deadline() => return attempt.timed_out(TaskResult::default()),
        }
    }
    AttemptEnd::Succeeded(TaskResult::default())
}
