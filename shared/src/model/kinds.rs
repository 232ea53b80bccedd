//! The built-in executor kinds and the shape of their `spec`.
//!
//! The API validates a spec with these types before it writes a task; the worker parses the same
//! types before it runs one, so both agree on what a spec means.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Runs a process: `{"command": ["echo", "hi"]}` (argv) or `{"command": "echo hi | wc"}` (`sh -c`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellSpec {
    /// What to run.
    pub command: ShellCommand,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (default: the worker's).
    #[serde(default)]
    pub cwd: Option<String>,
}

/// A shell task's command: an argv, or a script for `sh -c`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ShellCommand {
    /// Executed directly, without a shell.
    Argv(Vec<String>),
    /// Run by `sh -c`.
    Script(String),
}

/// Makes an HTTP request: `{"url": "https://…", "method": "POST", "headers": {…}, "body": …,
/// "expected_status": [200, 201]}`. A string body is sent as it is; any other JSON body is sent
/// as JSON; `"send_data": true` sends the task's data as the JSON body instead. Without
/// `expected_status`, any 2xx succeeds. 429 and 503 reject the attempt (try later, honouring
/// Retry-After); any other status fails it. The worker refuses loopback, private, link-local and
/// unique-local addresses unless its `http_allow` opens them, and follows no redirect unless
/// `"follow_redirects": true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    /// An absolute http or https URL.
    pub url: String,
    /// The method (default GET).
    #[serde(default = "default_method")]
    pub method: String,
    /// Request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The request body.
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    /// Send the task's data (the job's with the trigger's and the run's on top) as the JSON
    /// body, as a Quartz job reads its merged JobDataMap.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub send_data: bool,
    /// The statuses that mean success (default: any 2xx).
    #[serde(default)]
    pub expected_status: Vec<u16>,
    /// Follow redirects (at most 10), each checked as the first request is (the worker's
    /// `http_allow`); default false: a 3xx is the answer. A 307 or 308 to another host is not
    /// followed when the request has a body, and the task's headers are not sent to another host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow_redirects: bool,
}

fn default_method() -> String {
    "GET".into()
}

/// The methods an http task may use.
pub const HTTP_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Does nothing, optionally for a while: for tests and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoopSpec {
    /// How long to sleep before succeeding.
    #[serde(default)]
    pub sleep_ms: u64,
}

/// A spec that does not fit its kind.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The spec does not parse as the kind's spec.
    #[error("invalid {kind} spec: {message}")]
    Invalid {
        /// The executor kind.
        kind: &'static str,
        /// What serde said.
        message: String,
    },
    /// The http spec's URL or method is not usable.
    #[error("invalid http spec: {0}")]
    Http(String),
    /// The shell command is empty.
    #[error("a shell task needs a command: a non-empty argv or script")]
    EmptyCommand,
    /// One argument or variable is over the kernel's limit for a single string.
    #[error(
        "{what} is {size} bytes; the kernel takes at most {MAX_ARG_BYTES} per argument or \
         variable: pass large input in the task's data (it goes in a file when large)"
    )]
    ArgumentTooLong {
        /// Which one (`command[2]`, `env.BIG`).
        what: String,
        /// Its size.
        size: usize,
    },
}

/// The longest single argument or `NAME=value` a command may be started with (Linux's
/// MAX_ARG_STRLEN, 32 pages, less its terminating NUL): a longer one makes `exec` fail with
/// E2BIG, so it is refused at submission.
pub const MAX_ARG_BYTES: usize = 32 * 4096 - 1;

/// The executor kinds every worker has.
pub const BUILTIN_KINDS: [&str; 3] = ["shell", "http", "noop"];

/// The kinds a worker runs in its own event loop rather than as a process: their tasks go to a
/// worker group's inline queue and take an inline slot (`worker.inline_concurrency`), not a
/// process slot (`worker.concurrency`).
pub const INLINE_KINDS: [&str; 2] = ["noop", "http"];

/// Whether a task of `kind` runs inline ([`INLINE_KINDS`]).
pub fn runs_inline(kind: &str) -> bool {
    INLINE_KINDS.contains(&kind)
}

/// Whether a task of `kind` with `spec` has nothing to run: a noop without a sleep. Its worker
/// records the attempt succeeded straight from `ready`, in one statement, never `running`
/// (`task_lifecycle::complete_instant_attempts`): nothing could happen while it ran.
pub fn runs_instantly(kind: &str, spec: &serde_json::Value) -> bool {
    kind == "noop" && NoopSpec::parse(spec).is_ok_and(|s| s.sleep_ms == 0)
}

impl ShellSpec {
    /// Parses and checks a shell spec.
    pub fn parse(spec: &serde_json::Value) -> Result<Self, SpecError> {
        let parsed: Self =
            serde_json::from_value(spec.clone()).map_err(|e| SpecError::Invalid {
                kind: "shell",
                message: e.to_string(),
            })?;
        let empty = match &parsed.command {
            ShellCommand::Argv(argv) => argv.first().is_none_or(|program| program.is_empty()),
            ShellCommand::Script(script) => script.trim().is_empty(),
        };
        if empty {
            return Err(SpecError::EmptyCommand);
        }
        let too_long = |what: String, size: usize| {
            if size > MAX_ARG_BYTES {
                Err(SpecError::ArgumentTooLong { what, size })
            } else {
                Ok(())
            }
        };
        match &parsed.command {
            ShellCommand::Argv(argv) => {
                for (i, arg) in argv.iter().enumerate() {
                    too_long(format!("command[{i}]"), arg.len())?;
                }
            }
            ShellCommand::Script(script) => too_long("command".into(), script.len())?,
        }
        for (name, value) in &parsed.env {
            too_long(format!("env.{name}"), name.len() + 1 + value.len())?;
        }
        Ok(parsed)
    }
}

impl HttpSpec {
    /// Parses and checks an http spec.
    pub fn parse(spec: &serde_json::Value) -> Result<Self, SpecError> {
        let mut parsed: Self =
            serde_json::from_value(spec.clone()).map_err(|e| SpecError::Invalid {
                kind: "http",
                message: e.to_string(),
            })?;
        parsed.method = parsed.method.to_ascii_uppercase();
        if !HTTP_METHODS.contains(&parsed.method.as_str()) {
            return Err(SpecError::Http(format!(
                "method {:?} is not one of {}",
                parsed.method,
                HTTP_METHODS.join(", ")
            )));
        }
        let scheme_ok = ["http://", "https://"].iter().any(|scheme| {
            parsed
                .url
                .get(..scheme.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
                && parsed.url.len() > scheme.len()
        });
        if !scheme_ok {
            return Err(SpecError::Http(format!(
                "url {:?} must be an absolute http:// or https:// URL",
                parsed.url
            )));
        }
        if parsed.send_data && parsed.body.as_ref().is_some_and(|b| !b.is_null()) {
            return Err(SpecError::Http(
                "give either body or send_data, not both".into(),
            ));
        }
        if let Some(bad) = parsed
            .expected_status
            .iter()
            .find(|s| !(100..=599).contains(*s))
        {
            return Err(SpecError::Http(format!(
                "expected_status {bad} is not an HTTP status"
            )));
        }
        Ok(parsed)
    }

    /// Whether `status` means success.
    pub fn is_expected(&self, status: u16) -> bool {
        if self.expected_status.is_empty() {
            (200..300).contains(&status)
        } else {
            self.expected_status.contains(&status)
        }
    }
}

impl NoopSpec {
    /// Parses a noop spec (`null` and `{}` are both an instant no-op).
    pub fn parse(spec: &serde_json::Value) -> Result<Self, SpecError> {
        if spec.is_null() {
            return Ok(Self::default());
        }
        serde_json::from_value(spec.clone()).map_err(|e| SpecError::Invalid {
            kind: "noop",
            message: e.to_string(),
        })
    }
}

/// Checks the spec of a built-in kind. Kinds that are not built in are checked by the worker that
/// has an executor for them.
pub fn validate_builtin_spec(kind: &str, spec: &serde_json::Value) -> Result<(), SpecError> {
    match kind {
        "shell" => ShellSpec::parse(spec).map(drop),
        "noop" => NoopSpec::parse(spec).map(drop),
        "http" => HttpSpec::parse(spec).map(drop),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shell_spec_takes_argv_or_script() {
        let argv = ShellSpec::parse(&json!({"command": ["echo", "hi"]})).unwrap();
        assert_eq!(
            argv.command,
            ShellCommand::Argv(vec!["echo".into(), "hi".into()])
        );
        let script = ShellSpec::parse(&json!({"command": "echo hi | wc -c"})).unwrap();
        assert_eq!(
            script.command,
            ShellCommand::Script("echo hi | wc -c".into())
        );
    }

    #[test]
    fn shell_spec_refuses_empty_and_unknown() {
        assert!(matches!(
            ShellSpec::parse(&json!({"command": []})),
            Err(SpecError::EmptyCommand)
        ));
        assert!(matches!(
            ShellSpec::parse(&json!({"command": "  "})),
            Err(SpecError::EmptyCommand)
        ));
        assert!(ShellSpec::parse(&json!({})).is_err());
        assert!(ShellSpec::parse(&json!({"command": "x", "bogus": 1})).is_err());
    }

    #[test]
    fn http_spec_checks_url_method_and_statuses() {
        let spec = HttpSpec::parse(&json!({"url": "http://x/y", "method": "post"})).unwrap();
        assert_eq!(spec.method, "POST");
        assert!(spec.is_expected(204) && !spec.is_expected(301));
        let listed = HttpSpec::parse(&json!({"url": "https://x", "expected_status": [301]}));
        assert!(listed.unwrap().is_expected(301));
        assert!(HttpSpec::parse(&json!({"url": "ftp://x"})).is_err());
        assert!(HttpSpec::parse(&json!({"url": "http://"})).is_err());
        assert!(HttpSpec::parse(&json!({"url": "http://x", "method": "BREW"})).is_err());
        assert!(HttpSpec::parse(&json!({"url": "http://x", "expected_status": [42]})).is_err());
        assert!(HttpSpec::parse(&json!({"uri": "http://x"})).is_err());
    }

    #[test]
    fn only_a_noop_without_a_sleep_runs_instantly() {
        assert!(runs_instantly("noop", &json!(null)));
        assert!(runs_instantly("noop", &json!({})));
        assert!(runs_instantly("noop", &json!({"sleep_ms": 0})));
        assert!(!runs_instantly("noop", &json!({"sleep_ms": 5})));
        assert!(!runs_instantly("noop", &json!({"bogus": 1})));
        assert!(!runs_instantly("shell", &json!({"command": "true"})));
    }

    #[test]
    fn noop_spec_defaults() {
        assert_eq!(NoopSpec::parse(&json!(null)).unwrap().sleep_ms, 0);
        assert_eq!(
            NoopSpec::parse(&json!({"sleep_ms": 5})).unwrap().sleep_ms,
            5
        );
        assert!(NoopSpec::parse(&json!({"sleep_ms": -1})).is_err());
    }
}
