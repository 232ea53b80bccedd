//! Executors: what runs a task attempt, by kind.
//!
//! Built-in kinds are `shell`, `http` and `noop`; command templates from the worker's
//! configuration (`[executors.hive]`) add kinds that run as commands. A kind this worker has no
//! executor for, and an `execute_user` it may not switch to, are rejected (the task's reject budget
//! decides what happens next), never failed: another worker may be able to run it.
//!
//! Every executor ends an attempt early on its timeout, a kill request, or the worker's shutdown
//! past its grace ([`Attempt::interruption`]).

mod execute_user;
pub mod guard;
mod http;
mod http_policy;
mod noop;
pub mod output;
pub mod sandbox;
mod shell;
mod template;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chime_core::config::{CommandTemplate, WorkerSettings};
use chime_core::model::{HttpSpec, NoopSpec, ShellSpec, TaskMessage, TaskResult};
use chime_core::store::task_lifecycle::AttemptEnd;
use tokio_util::sync::CancellationToken;

use self::execute_user::UserPolicy;
use self::output::OutputTail;
use self::shell::TaskEnv;
use crate::lease::Lease;

/// One attempt being executed.
#[derive(Debug)]
pub struct Attempt {
    /// The task message.
    pub message: TaskMessage,
    /// Cancelled when the worker stops past its grace period.
    pub shutdown: CancellationToken,
    /// Cancelled when the task is killed (`chime task kill`).
    pub kill: CancellationToken,
    /// The task's timeout.
    pub timeout: Option<Duration>,
    /// What the attempt prints, read by the worker while it runs.
    pub output: OutputTail,
    /// The worker's lease, and its count when the attempt started.
    lease: (Arc<Lease>, u64),
}

/// Why an attempt was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// Its timeout passed.
    Timeout,
    /// It was killed on request.
    Kill,
    /// The worker stopped before it ended.
    Shutdown,
}

impl Attempt {
    /// An attempt of `message` that prints into `output`, run under `lease` as it was counted
    /// when the worker took hold of the attempt ([`Lease::mark`]).
    pub fn new(
        message: TaskMessage,
        shutdown: CancellationToken,
        kill: CancellationToken,
        output: OutputTail,
        lease: (Arc<Lease>, u64),
    ) -> Self {
        let timeout = message
            .timeout_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
        Self {
            message,
            shutdown,
            kill,
            timeout,
            output,
            lease,
        }
    }

    /// Whether the worker's lease ran out since the attempt started, or is not held now: the
    /// attempt may have been recovered elsewhere, and must not run (on).
    pub fn lease_lost(&self) -> bool {
        self.lease.0.lost_since(self.lease.1)
    }

    /// The end of an attempt stopped because the lease was lost while its command ran.
    pub fn lease_lost_end(&self, result: TaskResult) -> AttemptEnd {
        tracing::warn!(
            lapsed = self.lease.0.mark() != self.lease.1,
            held = self.lease.0.held(),
            "the attempt is given up: the worker's lease ran out since it was taken"
        );
        AttemptEnd::Abandoned(TaskResult {
            error: Some("interrupted: the worker's lease ran out".into()),
            ..result
        })
    }

    /// The end of an attempt let go before its command started, because the lease was lost
    /// since the worker took hold of it: nothing ran, so the task goes on to its next attempt
    /// as if this worker had never had it.
    pub fn lease_lost_before_start(&self) -> AttemptEnd {
        tracing::warn!(
            lapsed = self.lease.0.mark() != self.lease.1,
            held = self.lease.0.held(),
            "the attempt is let go unrun: the worker's lease ran out since it was taken"
        );
        AttemptEnd::NeverRan
    }

    /// Resolves when the attempt must stop: its timeout, a kill, or the worker's shutdown.
    pub async fn interruption(&self) -> Interruption {
        let deadline = async {
            match self.timeout {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.kill.cancelled() => Interruption::Kill,
            _ = deadline => Interruption::Timeout,
            _ = self.shutdown.cancelled() => Interruption::Shutdown,
        }
    }

    /// The end of an attempt cut short by `why`, with what it produced so far.
    pub fn interrupted(&self, why: Interruption, mut result: TaskResult) -> AttemptEnd {
        match why {
            Interruption::Timeout => {
                let ms = self.timeout.map_or(0, |t| t.as_millis());
                result.error = Some(format!("timed out after {ms} ms"));
                AttemptEnd::Failed {
                    result,
                    reason: "timeout",
                }
            }
            Interruption::Kill => {
                result.error = Some("killed on request".into());
                AttemptEnd::Killed(result)
            }
            Interruption::Shutdown => {
                result.error = Some("interrupted: the worker stopped before the task ended".into());
                AttemptEnd::Abandoned(result)
            }
        }
    }
}

/// The executors of one worker.
#[derive(Debug, Clone)]
pub struct Executors {
    output_tail_bytes: usize,
    result_max_bytes: usize,
    templates: BTreeMap<String, CommandTemplate>,
    http: reqwest::Client,
    http_policy: Arc<http_policy::HttpPolicy>,
    users: UserPolicy,
    env: TaskEnv,
    sandbox: Arc<sandbox::Sandbox>,
}

impl Executors {
    /// Executors with the worker's settings: the output tail kept, the users tasks may run as,
    /// the variables passed to them, and its command templates as extra kinds.
    pub fn new(
        settings: &WorkerSettings,
        templates: BTreeMap<String, CommandTemplate>,
    ) -> Result<Self, crate::WorkerError> {
        // ring is the one crypto provider linked in; a second install attempt is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let policy = Arc::new(
            http_policy::HttpPolicy::new(&settings.http_allow)
                .map_err(crate::WorkerError::HttpAllow)?,
        );
        // Names resolve through the policy, so the address checked is the address used; the
        // executor follows redirects itself, checking each (`http::run`); and no proxy stands
        // between the check and the connection.
        let http = reqwest::Client::builder()
            .user_agent(concat!("chime-worker/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(http_policy::Guarded(policy.clone()))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(crate::WorkerError::HttpClient)?;
        let sandbox = sandbox::Sandbox::create().map_err(crate::WorkerError::Guard)?;
        Ok(Self {
            output_tail_bytes: settings.output_tail_bytes,
            result_max_bytes: settings.result_max_bytes,
            templates,
            http,
            http_policy: policy,
            users: UserPolicy {
                default_user: settings.default_user.clone(),
                allowed: settings.execute_users.clone(),
            },
            env: TaskEnv::from_worker(&settings.pass_env),
            sandbox: Arc::new(sandbox),
        })
    }

    /// Where this worker's attempts run, and its guard.
    pub fn sandbox(&self) -> Arc<sandbox::Sandbox> {
        self.sandbox.clone()
    }

    /// A buffer for one attempt's output, of the configured size.
    pub fn output_tail(&self) -> OutputTail {
        OutputTail::new(self.output_tail_bytes)
    }

    /// The kinds this worker can run.
    pub fn kinds(&self) -> Vec<String> {
        let builtin = ["shell", "http", "noop"].map(String::from);
        builtin
            .into_iter()
            .chain(self.templates.keys().cloned())
            .collect()
    }

    /// Runs the attempt to its end.
    pub async fn execute(&self, attempt: &Attempt) -> AttemptEnd {
        if attempt.lease_lost() {
            return attempt.lease_lost_before_start();
        }
        let spec = &attempt.message.spec;
        let kind = attempt.message.kind.as_str();
        match kind {
            "shell" => match ShellSpec::parse(spec) {
                Ok(spec) => self.run_process(spec, attempt).await,
                Err(error) => invalid_spec(error),
            },
            "http" => match HttpSpec::parse(spec) {
                Ok(spec) => http::run(&self.http, &self.http_policy, spec, attempt).await,
                Err(error) => invalid_spec(error),
            },
            "noop" => match NoopSpec::parse(spec) {
                Ok(spec) => noop::run(spec, attempt).await,
                Err(error) => invalid_spec(error),
            },
            _ => match self.templates.get(kind) {
                Some(template) => match template::render(template, &attempt.message) {
                    Ok(spec) => self.run_process(spec, attempt).await,
                    Err(error) => invalid_spec(error),
                },
                None => AttemptEnd::Rejected {
                    result: TaskResult {
                        error: Some(format!("this worker has no executor for kind {kind:?}")),
                        ..TaskResult::default()
                    },
                    retry_after: None,
                },
            },
        }
    }

    /// Runs a command as the task's `execute_user`, if this worker may switch to it.
    async fn run_process(&self, spec: ShellSpec, attempt: &Attempt) -> AttemptEnd {
        let user = match self.users.resolve(attempt.message.execute_user.as_deref()) {
            Ok(user) => user,
            Err(refusal) => {
                return AttemptEnd::Rejected {
                    result: TaskResult {
                        error: Some(refusal),
                        ..TaskResult::default()
                    },
                    retry_after: None,
                };
            }
        };
        shell::run(
            spec,
            user,
            &self.env,
            &self.sandbox,
            attempt,
            self.result_max_bytes,
        )
        .await
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
