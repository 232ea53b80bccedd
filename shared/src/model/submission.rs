//! An ad-hoc task as a client submits it (`POST /api/v1/tasks`, `chime submit`, or a message on the
//! `<prefix>.submit` exchange), and the checks it must pass before anything is written.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::kinds::{SpecError, validate_builtin_spec};
use super::text::{check_json, check_opt_text};
use crate::config::is_valid_name;

/// The largest spec plus data a task may carry, in bytes of JSON.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

/// How the interval between retries grows: `{"kind":"fixed"}` or
/// `{"kind":"exponential","factor":2,"max_interval_ms":600000,"jitter":0.1}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Backoff {
    /// The same interval every time.
    #[default]
    Fixed,
    /// interval × factor^(n-1), capped, with ± jitter (a fraction of the interval).
    Exponential {
        /// Growth per retry (default 2).
        #[serde(default = "default_factor")]
        factor: f64,
        /// The cap.
        #[serde(default = "default_max_interval_ms")]
        max_interval_ms: u64,
        /// Fraction of randomness, 0 to 1 (default 0.1).
        #[serde(default = "default_jitter")]
        jitter: f64,
    },
}

/// The longest a retry may wait: 30 days.
pub const MAX_INTERVAL_MS: u64 = 30 * 24 * 60 * 60 * 1000;

impl Backoff {
    /// Checks the numbers: factor at least 1, jitter between 0 and 1.
    pub fn validate(&self) -> Result<(), SubmissionError> {
        match *self {
            Self::Fixed => Ok(()),
            Self::Exponential {
                factor,
                jitter,
                max_interval_ms,
            } => {
                if max_interval_ms > MAX_INTERVAL_MS {
                    return Err(SubmissionError::OutOfRange {
                        field: "backoff.max_interval_ms",
                        expected: "at most 30 days (2592000000)",
                    });
                }
                if !(factor.is_finite() && factor >= 1.0) {
                    return Err(SubmissionError::OutOfRange {
                        field: "backoff.factor",
                        expected: "at least 1",
                    });
                }
                if !(0.0..=1.0).contains(&jitter) {
                    return Err(SubmissionError::OutOfRange {
                        field: "backoff.jitter",
                        expected: "between 0 and 1",
                    });
                }
                Ok(())
            }
        }
    }
}

fn default_factor() -> f64 {
    2.0
}
fn default_max_interval_ms() -> u64 {
    10 * 60 * 1000
}
fn default_jitter() -> f64 {
    0.1
}

/// A new ad-hoc task.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTask {
    /// Client-chosen id: submitting the same id twice makes one task.
    #[serde(default)]
    pub id: Option<Uuid>,
    /// Executor kind: shell, http, noop, or a kind configured on workers.
    pub kind: String,
    /// Worker group; default: the kind's route, else `default`.
    #[serde(default)]
    pub group: Option<String>,
    /// The executor's input.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// Data passed to the task.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// The data time it runs for.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<Timestamp>,
    /// Higher runs first (default 5).
    #[serde(default)]
    pub priority: Option<i32>,
    /// Timeout of one attempt.
    #[serde(default)]
    pub timeout_ms: Option<i64>,
    /// Who submitted it.
    #[serde(default)]
    pub submit_user: Option<String>,
    /// The OS user it runs as.
    #[serde(default)]
    pub execute_user: Option<String>,
    /// Retries after rejections (default 0).
    #[serde(default)]
    pub reject_retries: Option<i32>,
    /// Wait before a rejected task is offered again (default 3000).
    #[serde(default)]
    pub reject_interval_ms: Option<i64>,
    /// Retries after failures (default 0).
    #[serde(default)]
    pub failed_retries: Option<i32>,
    /// Wait before a failed task runs again (default 3000).
    #[serde(default)]
    pub failed_interval_ms: Option<i64>,
    /// How the failed interval grows.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Whether an attempt whose worker died re-runs.
    #[serde(default)]
    pub requests_recovery: Option<bool>,
    /// A label for people (lists show it, their text search finds it); at most 200 characters.
    #[serde(default)]
    pub name: Option<String>,
}

/// Why a submission was refused.
#[derive(Debug, thiserror::Error)]
pub enum SubmissionError {
    /// No kind given.
    #[error("a task needs a kind (shell, http, noop, or a configured kind)")]
    MissingKind,
    /// The group cannot be a queue name.
    #[error("invalid worker group {0:?}: use 1-100 letters, digits, '-', '_' or '.'")]
    InvalidGroup(String),
    /// The spec does not fit the kind.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// spec + data is too big.
    #[error("payload too large: spec and data are {size} bytes, the limit is {limit}")]
    TooLarge {
        /// The size found.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A NUL character in a text field.
    #[error(transparent)]
    Nul(#[from] super::text::NulInText),
    /// A name field (kind, execute_user) that is not a valid name.
    #[error("invalid {field} {value:?}: use 1-100 letters, digits, '-', '_' or '.'")]
    InvalidName {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
    },
    /// A number out of range.
    #[error("{field} must be {expected}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
}

impl NewTask {
    /// Checks everything that can be checked without the database. Kinds that are not built in are
    /// checked against the routes by the store.
    pub fn validate(&self) -> Result<(), SubmissionError> {
        if self.kind.trim().is_empty() {
            return Err(SubmissionError::MissingKind);
        }
        // PostgreSQL's timestamps reach back to 4713 BC only, where jiff's go further: a data
        // time past its range would fail the whole batch it was written with.
        if self
            .data_time
            .is_some_and(|t| !(-62_135_596_800..=253_402_300_799).contains(&t.as_second()))
        {
            return Err(SubmissionError::OutOfRange {
                field: "data_time",
                expected: "between 0001-01-01 and 9999-12-31",
            });
        }
        if !is_valid_name(&self.kind) {
            return Err(SubmissionError::InvalidName {
                field: "kind",
                value: self.kind.clone(),
            });
        }
        if let Some(user) = self.execute_user.as_deref().filter(|u| !u.is_empty())
            && !is_valid_name(user)
        {
            return Err(SubmissionError::InvalidName {
                field: "execute_user",
                value: user.to_string(),
            });
        }
        check_opt_text("submit_user", self.submit_user.as_deref())?;
        check_opt_text("name", self.name.as_deref())?;
        if self
            .name
            .as_deref()
            .is_some_and(|n| n.chars().count() > 200)
        {
            return Err(SubmissionError::OutOfRange {
                field: "name",
                expected: "at most 200 characters",
            });
        }
        check_json("spec", &self.spec)?;
        check_json("data", &self.data)?;
        if let Some(group) = &self.group
            && !is_valid_name(group)
        {
            return Err(SubmissionError::InvalidGroup(group.clone()));
        }
        let size = json_len(&self.spec) + json_len(&self.data);
        if size > MAX_PAYLOAD_BYTES {
            return Err(SubmissionError::TooLarge {
                size,
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        validate_builtin_spec(&self.kind, &self.spec)?;
        let non_negative = |v: Option<i64>, field: &'static str| match v {
            Some(n) if n < 0 => Err(SubmissionError::OutOfRange {
                field,
                expected: "zero or more",
            }),
            _ => Ok(()),
        };
        non_negative(self.reject_retries.map(i64::from), "reject_retries")?;
        non_negative(self.failed_retries.map(i64::from), "failed_retries")?;
        non_negative(self.reject_interval_ms, "reject_interval_ms")?;
        non_negative(self.failed_interval_ms, "failed_interval_ms")?;
        if matches!(self.timeout_ms, Some(t) if t <= 0) {
            return Err(SubmissionError::OutOfRange {
                field: "timeout_ms",
                expected: "positive",
            });
        }
        if let Some(backoff) = &self.backoff {
            backoff.validate()?;
        }
        Ok(())
    }
}

fn json_len(value: &serde_json::Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a Value into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shell(command: serde_json::Value) -> NewTask {
        NewTask {
            kind: "shell".into(),
            spec: json!({ "command": command }),
            ..NewTask::default()
        }
    }

    #[test]
    fn accepts_a_shell_task() {
        shell(json!(["echo", "hi"])).validate().unwrap();
    }

    #[test]
    fn refuses_bad_input_with_the_reason() {
        let no_kind = NewTask::default();
        assert!(matches!(
            no_kind.validate(),
            Err(SubmissionError::MissingKind)
        ));
        let empty = shell(json!([]));
        assert!(
            empty
                .validate()
                .unwrap_err()
                .to_string()
                .contains("needs a command")
        );
        let big = NewTask {
            data: json!("x".repeat(MAX_PAYLOAD_BYTES)),
            ..shell(json!(["true"]))
        };
        assert!(matches!(
            big.validate(),
            Err(SubmissionError::TooLarge { .. })
        ));
        let group = NewTask {
            group: Some("a b".into()),
            ..shell(json!(["true"]))
        };
        assert!(matches!(
            group.validate(),
            Err(SubmissionError::InvalidGroup(_))
        ));
    }

    #[test]
    fn backoff_json() {
        let b: Backoff = serde_json::from_value(json!({"kind": "exponential"})).unwrap();
        assert_eq!(
            b,
            Backoff::Exponential {
                factor: 2.0,
                max_interval_ms: 600_000,
                jitter: 0.1
            }
        );
        let f: Backoff = serde_json::from_value(json!({"kind": "fixed"})).unwrap();
        assert_eq!(f, Backoff::Fixed);
    }
}
