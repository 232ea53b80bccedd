//! Settings of every chime process (docs/src/operations/configuration.md).
//!
//! Layers, highest first: command-line flags (passed in as [`Overrides`]), `CHIME_*` environment
//! variables, `DATABASE_URL` (for the database URL only), an optional `chime.toml`, defaults.

pub mod catalog;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// Default PostgreSQL URL; the database is created if it does not exist.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/chime";
/// Default RabbitMQ URL.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// Default prefix of every AMQP name.
pub const DEFAULT_PREFIX: &str = "chime";
/// Default address the API listens on.
pub const DEFAULT_API_ADDR: &str = "127.0.0.1:8080";
/// Default address the client talks to.
pub const DEFAULT_API_URL: &str = "http://127.0.0.1:8080";

/// A setting that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file or environment holds a value of the wrong shape.
    #[error("configuration: {0}")]
    Invalid(#[from] config::ConfigError),
    /// A value parsed but makes no sense.
    #[error("configuration: {key}: {message}")]
    Value {
        /// The offending key.
        key: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

/// Everything a chime process needs to know to reach its peers.
#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    /// PostgreSQL URL (`CHIME_DATABASE_URL`, else `DATABASE_URL`).
    pub database_url: String,
    /// RabbitMQ URL (`CHIME_AMQP_URL`).
    pub amqp_url: String,
    /// Prefix of every AMQP exchange and queue name (`CHIME_PREFIX`).
    pub prefix: String,
    /// Address the API listens on (`CHIME_API_ADDR`).
    pub api_addr: String,
    /// Base URL the client talks to (`CHIME_API_URL`).
    pub api_url: String,
    /// Bearer token required by mutating API calls, and sent by the client (`CHIME_API_TOKEN`).
    pub api_token: Option<String>,
    /// Where a service serves its own `/metrics` (`--metrics-addr`, `CHIME_METRICS_ADDR`), apart
    /// from the API; unset, only `chime api` serves them.
    #[serde(default)]
    pub metrics_addr: Option<String>,
    /// Serve `/metrics` without a token when tokens are in use (`CHIME_METRICS_PUBLIC`; default
    /// false: a `read` token is needed, like every other read).
    pub metrics_public: bool,
    /// Let the API listen on a non-loopback address with no token (`--insecure-no-auth`,
    /// `CHIME_INSECURE_NO_AUTH`): anyone who reaches it may run commands on the workers.
    pub insecure_no_auth: bool,
    /// Broker users allowed to submit over AMQP (`[amqp_users.NAME] role = "operate"`): the
    /// identity a submission's validated `user_id` property maps to.
    #[serde(default)]
    pub amqp_users: BTreeMap<String, AmqpUser>,
    /// Size of the PostgreSQL connection pool (`CHIME_DB_POOL_SIZE`), for whichever service
    /// runs; without it each has its own ([`Settings::pool_size`]).
    #[serde(default)]
    pub db_pool_size: Option<u32>,
    /// Worker settings (`[worker]` in chime.toml, `CHIME_WORKER__…` in the environment).
    pub worker: WorkerSettings,
    /// Scheduler settings (`[scheduler]` in chime.toml, `CHIME_SCHEDULER__…`).
    pub scheduler: SchedulerConfig,
    /// Command templates: job kinds a worker runs as a command (`[executors.hive]
    /// command = ["hive", "-e", "{content}"]`), keyed by kind.
    #[serde(default)]
    pub executors: BTreeMap<String, CommandTemplate>,
}

/// A job kind run as a command: each `{name}` in an argument is replaced by the task spec's
/// field `name` (or `task_id`, `attempt`, `data_time`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandTemplate {
    /// The argv, with `{placeholders}`.
    pub command: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (default: the worker's).
    #[serde(default)]
    pub cwd: Option<String>,
}

/// What a broker user may do when it submits over AMQP.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpUser {
    /// `operate` or `admin` may submit; `read` may not.
    pub role: crate::model::Role,
    /// The OS users its tasks may ask for (`*`: any).
    #[serde(default)]
    pub execute_users: Vec<String>,
}

/// Settings of a scheduler instance.
#[derive(Debug, Clone, Deserialize)]
pub struct SchedulerConfig {
    /// A fire later than this is misfired and follows its trigger's misfire policy.
    pub misfire_threshold_ms: u64,
    /// Triggers due this far ahead are fired early; their messages wait for their time.
    pub lookahead_ms: u64,
    /// Triggers acquired per round.
    pub batch: i64,
    /// How often an instance checks in; one silent for twice this long is dead.
    pub checkin_interval_ms: u64,
    /// A `ready` task no worker has started for this long, whose queue (its group's process or
    /// inline queue, by its kind) is empty, has its message published again (it was lost on the
    /// bus).
    pub republish_after_ms: u64,
    /// Ended tasks (with their attempts) and fired-trigger rows older than this many days are
    /// pruned, hourly, by one scheduler instance at a time; 0 keeps history for ever.
    pub retention_days: u32,
}

/// Settings of a worker process.
#[derive(Debug, Clone, Deserialize)]
pub struct WorkerSettings {
    /// Worker groups (queues) this worker consumes.
    pub groups: Vec<String>,
    /// How many tasks that run as processes (shell, command templates) it runs at once.
    pub concurrency: u16,
    /// How many tasks it runs inline at once (noop, http: no process, a place in the worker's own
    /// event loop; default 200). They have their own queue per group, with this prefetch.
    pub inline_concurrency: u16,
    /// How many unacked deliveries it holds per process queue (default: the concurrency). A delivery is
    /// acked when its task's outcome is committed, so by default a worker of one group holds no
    /// more tasks than it has slots, and a task never waits behind a busy worker while another
    /// has a slot free (a worker of several groups holds up to this many per group). More saves a broker round trip per short task, at the price of tasks waiting
    /// unacked behind long ones; deliveries beyond the running ones go back to the queue if the
    /// worker stops.
    #[serde(default)]
    pub prefetch: Option<u16>,
    /// How many ad-hoc submissions (from `<prefix>.submit`) it records with one commit, at most
    /// (default 500); it holds twice as many unacked.
    pub submit_batch: u16,
    /// How long it waits after a submission for more to record with it (default 5 ms); a full
    /// batch goes at once.
    pub submit_batch_window_ms: u64,
    /// Whether it runs the submissions it records itself, for its own groups and kinds, when it
    /// has a slot free (default true): such a task skips the broker, as a Celery worker runs the
    /// message it took. Off, every task goes through its group's queue to whichever worker has
    /// room.
    pub take_submissions: bool,
    /// How many bytes of a task's output are kept (the tail).
    pub output_tail_bytes: usize,
    /// The largest result a shell task may write to `$CHIME_RESULT_FILE` (default 1 MiB); a
    /// larger one fails the attempt.
    pub result_max_bytes: usize,
    /// How long a stopping worker waits for running tasks before it leaves them to recovery.
    pub shutdown_grace_ms: u64,
    /// How long each heartbeat holds the worker's lease (default 2500): a worker killed with -9
    /// is recovered about this long after its last heartbeat. A heartbeat's round trip to
    /// PostgreSQL must stay under `(lease_ms - 800) / 2` (850 ms by default), or the worker
    /// stops its attempts; it lengthens its own lease as round trips grow, up to eight times
    /// this. Between 1500 and 60000.
    pub lease_ms: u64,
    /// The user a task without an `execute_user` runs as when the worker runs as root (default
    /// `nobody`): a task never gets root unless it asks for it and root is allowed.
    pub default_user: String,
    /// The users a task may ask for as its `execute_user` on this worker (`root` only if listed;
    /// `*`: any user but root). Default: none, so only the default user.
    #[serde(default)]
    pub execute_users: Vec<String>,
    /// Variables of the worker's environment passed on to every task (beside PATH, HOME, LANG,
    /// USER, the task's own `env` and the `CHIME_TASK_*` variables). Never pass `CHIME_*`
    /// settings.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// What http tasks may reach beyond the public internet (`CHIME_WORKER__HTTP_ALLOW`,
    /// comma-separated): networks (`10.20.0.0/16`, `127.0.0.1`) and host names
    /// (`billing.internal`, `*.svc.cluster.local`). Default none: an http task may not call this
    /// machine, its private networks or a cloud's metadata service.
    #[serde(default)]
    pub http_allow: Vec<String>,
    /// Run tasks as another user even where they could reach the store or the broker without
    /// credentials (`CHIME_WORKER__ALLOW_OPEN_STORE`; default false: a root worker that finds
    /// PostgreSQL trusting local connections, or RabbitMQ's `guest` open, refuses to start). For
    /// throwaway machines and test suites only.
    #[serde(default)]
    pub allow_open_store: bool,
}

impl WorkerSettings {
    /// How many submissions go in one batch, and how long one waits for the rest of its batch.
    pub fn submit_batch(&self) -> (usize, std::time::Duration) {
        (
            usize::from(self.submit_batch.max(1)),
            std::time::Duration::from_millis(self.submit_batch_window_ms),
        )
    }

    /// The prefetch to ask the broker for.
    pub fn prefetch(&self) -> u16 {
        self.prefetch.unwrap_or(self.concurrency).max(1)
    }
}

/// Values given on the command line; `None` leaves the lower layers in charge.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--database-url`
    pub database_url: Option<String>,
    /// `--amqp-url`
    pub amqp_url: Option<String>,
    /// `--prefix`
    pub prefix: Option<String>,
    /// `--api-addr`
    pub api_addr: Option<String>,
    /// `--api-url`
    pub api_url: Option<String>,
    /// `--token`
    pub api_token: Option<String>,
    /// `--insecure-no-auth`
    pub insecure_no_auth: Option<bool>,
    /// `--metrics-addr`
    pub metrics_addr: Option<String>,
    /// `--groups`
    pub worker_groups: Option<Vec<String>>,
    /// `--concurrency`
    pub worker_concurrency: Option<u16>,
    /// `--inline-concurrency`
    pub worker_inline_concurrency: Option<u16>,
    /// `--config`: the configuration file (default `./chime.toml`, or `CHIME_CONFIG`).
    pub config_file: Option<PathBuf>,
}

impl Settings {
    /// The most pooled PostgreSQL connections a process running `role` opens: `db_pool_size`
    /// if set, else the role's own. A worker's pool grows with its slots — one connection, one
    /// more per 8 slots, at most 3 — since it batches its transitions (its liveness session is
    /// one more, outside the pool); a scheduler's loops share 4, a dependency service's events
    /// 3, an API's requests 8, and `chime up`, which runs them all, 16. A process also holds
    /// one connection per LISTEN it makes (schedulers and `chime up`: 2).
    /// docs/src/operations/connections.md has the sum. Every role but a worker gets at least 2:
    /// some of their loops hold one connection (a sweep's lock, a firing transaction) while
    /// another does the work.
    pub fn pool_size(&self, role: &str) -> u32 {
        let floor = if role == "worker" { 1 } else { 2 };
        if let Some(size) = self.db_pool_size {
            return size.max(floor);
        }
        match role {
            "worker" => (1 + u32::from(self.worker.concurrency) / 8).min(3),
            "scheduler" => 4,
            "dependency" => 3,
            "api" => 8,
            _ => 16,
        }
    }

    /// Loads the settings from every layer, flags winning.
    pub fn load(overrides: Overrides) -> Result<Self, ConfigError> {
        let file = overrides
            .config_file
            .clone()
            .or_else(|| std::env::var_os("CHIME_CONFIG").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("chime.toml"));
        let mut builder = config::Config::builder()
            .set_default("database_url", DEFAULT_DATABASE_URL)?
            .set_default("amqp_url", DEFAULT_AMQP_URL)?
            .set_default("prefix", DEFAULT_PREFIX)?
            .set_default("api_addr", DEFAULT_API_ADDR)?
            .set_default("api_url", DEFAULT_API_URL)?
            .set_default("worker.groups", vec!["default"])?
            .set_default("worker.concurrency", 16)?
            .set_default("worker.inline_concurrency", 200)?
            .set_default("worker.take_submissions", true)?
            .set_default("worker.submit_batch", 500)?
            .set_default("worker.submit_batch_window_ms", 5)?
            .set_default("worker.output_tail_bytes", 64 * 1024)?
            .set_default("worker.result_max_bytes", 1024 * 1024)?
            .set_default("worker.shutdown_grace_ms", 10_000)?
            .set_default("worker.lease_ms", 2_500)?
            .set_default("worker.default_user", "nobody")?
            .set_default("worker.allow_open_store", false)?
            .set_default("metrics_public", false)?
            .set_default("insecure_no_auth", false)?
            .set_default("scheduler.misfire_threshold_ms", 60_000)?
            .set_default("scheduler.lookahead_ms", 1500)?
            .set_default("scheduler.batch", 1000)?
            .set_default("scheduler.checkin_interval_ms", 2000)?
            .set_default("scheduler.republish_after_ms", 60000)?
            .set_default("scheduler.retention_days", 30)?
            .add_source(
                config::File::from(file)
                    .format(config::FileFormat::Toml)
                    .required(false),
            );
        if let Ok(url) = std::env::var("DATABASE_URL") {
            builder = builder.set_override("database_url", url)?;
        }
        builder = builder.add_source(
            config::Environment::with_prefix("CHIME")
                .prefix_separator("_")
                .separator("__")
                .list_separator(",")
                .with_list_parse_key("worker.groups")
                .with_list_parse_key("worker.execute_users")
                .with_list_parse_key("worker.pass_env")
                .with_list_parse_key("worker.http_allow")
                .try_parsing(true),
        );
        // Environment sources sit below overrides, so DATABASE_URL (an override above) must not
        // beat CHIME_DATABASE_URL: re-apply the latter explicitly.
        if let Ok(url) = std::env::var("CHIME_DATABASE_URL") {
            builder = builder.set_override("database_url", url)?;
        }
        let o = overrides;
        builder = builder
            .set_override_option("database_url", o.database_url)?
            .set_override_option("amqp_url", o.amqp_url)?
            .set_override_option("prefix", o.prefix)?
            .set_override_option("api_addr", o.api_addr)?
            .set_override_option("api_url", o.api_url)?
            .set_override_option("api_token", o.api_token)?
            .set_override_option("insecure_no_auth", o.insecure_no_auth)?
            .set_override_option("metrics_addr", o.metrics_addr)?
            .set_override_option("worker.groups", o.worker_groups)?
            .set_override_option("worker.concurrency", o.worker_concurrency.map(i64::from))?
            .set_override_option(
                "worker.inline_concurrency",
                o.worker_inline_concurrency.map(i64::from),
            )?;
        let mut settings: Settings = builder.build()?.try_deserialize()?;
        settings.api_token = settings.api_token.filter(|t| !t.is_empty());
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if !is_valid_name(&self.prefix) {
            return Err(ConfigError::Value {
                key: "prefix",
                message: format!(
                    "{:?} must be 1-100 characters of letters, digits, '-', '_' or '.'",
                    self.prefix
                ),
            });
        }
        if self.worker.groups.is_empty() {
            return Err(ConfigError::Value {
                key: "worker.groups",
                message: "name at least one worker group".into(),
            });
        }
        if let Some(bad) = self.worker.groups.iter().find(|g| !is_valid_name(g)) {
            return Err(ConfigError::Value {
                key: "worker.groups",
                message: format!(
                    "{bad:?} must be 1-100 characters of letters, digits, '-', '_' or '.'"
                ),
            });
        }
        if self.scheduler.batch < 1 || self.scheduler.checkin_interval_ms == 0 {
            return Err(ConfigError::Value {
                key: "scheduler",
                message: "batch and checkin_interval_ms must be at least 1".into(),
            });
        }
        for (kind, template) in &self.executors {
            if crate::model::kinds::BUILTIN_KINDS.contains(&kind.as_str()) {
                return Err(ConfigError::Value {
                    key: "executors",
                    message: format!("{kind:?} is a built-in kind; name the template otherwise"),
                });
            }
            if template
                .command
                .first()
                .is_none_or(|program| program.is_empty())
            {
                return Err(ConfigError::Value {
                    key: "executors",
                    message: format!("executors.{kind}.command needs a program"),
                });
            }
        }
        if let Some(bad) = self
            .worker
            .pass_env
            .iter()
            .find(|name| name.starts_with("CHIME_") || name.is_empty() || name.contains('='))
        {
            return Err(ConfigError::Value {
                key: "worker.pass_env",
                message: format!(
                    "{bad:?} may not be passed to tasks: name plain variables, never a CHIME_ \
                     setting"
                ),
            });
        }
        if !is_valid_name(&self.worker.default_user) {
            return Err(ConfigError::Value {
                key: "worker.default_user",
                message: format!("{:?} is not a user name", self.worker.default_user),
            });
        }
        if self.worker.concurrency == 0 {
            return Err(ConfigError::Value {
                key: "worker.concurrency",
                message: "must be at least 1".into(),
            });
        }
        if self.worker.inline_concurrency == 0 {
            return Err(ConfigError::Value {
                key: "worker.inline_concurrency",
                message: "must be at least 1".into(),
            });
        }
        if !(1..=10_000).contains(&self.worker.submit_batch) {
            return Err(ConfigError::Value {
                key: "worker.submit_batch",
                message: "must be between 1 and 10000".into(),
            });
        }
        if !(1_500..=60_000).contains(&self.worker.lease_ms) {
            return Err(ConfigError::Value {
                key: "worker.lease_ms",
                message: "must be between 1500 and 60000".into(),
            });
        }
        if self.worker.submit_batch_window_ms > 1_000 {
            return Err(ConfigError::Value {
                key: "worker.submit_batch_window_ms",
                message: "must be at most 1000".into(),
            });
        }
        Ok(())
    }
}

/// A URL without its password, for logs and error messages.
pub fn redact_url(url: &str) -> String {
    // The last '@' ends the credentials: a password may hold one unescaped.
    match url.split_once("://").and_then(|(scheme, rest)| {
        rest.rsplit_once('@')
            .map(|(creds, host)| (scheme, creds, host))
    }) {
        Some((scheme, creds, host)) => {
            let user = creds.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_string(),
    }
}

/// Checks the URLs a service connects with: PostgreSQL's must be `postgres://` (or
/// `postgresql://`), and every RabbitMQ node's `amqp://` (or `amqps://`). A wrong scheme is a
/// mistake no retry mends, so services refuse it at start-up; client verbs, which use neither,
/// do not look.
pub fn check_service_urls(settings: &Settings) -> Result<(), ConfigError> {
    check_database_url(&settings.database_url).map_err(|message| ConfigError::Value {
        key: "database_url",
        message,
    })?;
    crate::bus::connection::check_broker_urls(&settings.amqp_url).map_err(|message| {
        ConfigError::Value {
            key: "amqp_url",
            message,
        }
    })
}

/// Checks that `url` is a PostgreSQL URL (`postgres://` or `postgresql://`). The driver reads
/// any URL as PostgreSQL's, so without this a `mysql://` URL to the PostgreSQL port would make a
/// database there; every path that connects to the store checks it ([`crate::store::Store`]).
pub fn check_database_url(url: &str) -> Result<(), String> {
    let scheme = url.split_once("://").map(|(s, _)| s);
    if matches!(scheme, Some("postgres" | "postgresql")) {
        return Ok(());
    }
    Err(format!(
        "{:?} is not a PostgreSQL URL: chime's store is PostgreSQL, expected \
         postgres://user:password@host:5432/database",
        redact_url(url)
    ))
}

/// Whether `name` may be used as an AMQP prefix, a worker group, a job, trigger, calendar or token
/// name (it becomes part of a queue name or of a URL path): 1-100 letters, digits, `-`, `_` or
/// `.`, and not `.` or `..`, which a path would resolve away.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
