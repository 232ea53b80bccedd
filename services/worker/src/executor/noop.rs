//! The `noop` kind: succeeds, optionally after sleeping. For tests and benchmarks.

use std::time::Duration;

use chime_core::model::{NoopSpec, TaskResult};
use chime_core::store::task_lifecycle::AttemptEnd;

use super::Attempt;

/// Sleeps `sleep_ms` (cut short by a kill, the timeout or shutdown), then succeeds.
pub async fn run(spec: NoopSpec, attempt: &Attempt) -> AttemptEnd {
    if spec.sleep_ms > 0 {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(spec.sleep_ms)) => {}
            why = attempt.interruption() => {
                return attempt.interrupted(why, TaskResult::default());
            }
        }
    }
    AttemptEnd::Succeeded(TaskResult::default())
}
