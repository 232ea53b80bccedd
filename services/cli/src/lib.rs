//! The `chime` binary: runs any service, or all of them, and is the API's client.
//!
//! Services: `up` (api + worker in one process), `api`, `worker`, `migrate`. Client verbs talk to
//! the API at `CHIME_API_URL`: `submit`, `task list|show`, `workers`. `schedule preview` runs the
//! schedule engine locally. Errors print one
//! `error: …` line on stderr and exit non-zero (2 for bad usage).

pub mod client;
pub mod commands;
pub mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use chime_core::config::{Overrides, Settings};
use clap::{Args, Parser, Subcommand};

use crate::client::ApiClient;
use crate::commands::services::Services;

/// chime: a distributed job scheduler on PostgreSQL and RabbitMQ.
#[derive(Debug, Parser)]
#[command(name = "chime", version, about)]
pub struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// What the services connect to, in their help (the flags are accepted everywhere, but only
/// services and `migrate` use them, so client verbs do not list them).
const CONNECTION_HELP: &str = "Connections:
      --database-url <URL>  PostgreSQL URL [env: CHIME_DATABASE_URL, DATABASE_URL]
      --amqp-url <URL>      RabbitMQ URL [env: CHIME_AMQP_URL]
      --prefix <PREFIX>     Prefix of AMQP names [env: CHIME_PREFIX]";

#[derive(Debug, Args)]
struct GlobalArgs {
    /// PostgreSQL URL [env: CHIME_DATABASE_URL, DATABASE_URL]
    #[arg(long, global = true, hide = true)]
    database_url: Option<String>,
    /// RabbitMQ URL [env: CHIME_AMQP_URL]
    #[arg(long, global = true, hide = true)]
    amqp_url: Option<String>,
    /// Prefix of AMQP names [env: CHIME_PREFIX]
    #[arg(long, global = true, hide = true)]
    prefix: Option<String>,
    /// The API the client talks to [env: CHIME_API_URL]
    #[arg(long, global = true, help_heading = "Global options")]
    api_url: Option<String>,
    /// Bearer token [env: CHIME_API_TOKEN]
    #[arg(long, global = true, help_heading = "Global options")]
    token: Option<String>,
    /// Configuration file (default ./chime.toml) [env: CHIME_CONFIG]
    #[arg(long, global = true, help_heading = "Global options")]
    config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs every service in one process (the single-machine default).
    #[command(after_help = CONNECTION_HELP)]
    Up(ServeArgs),
    /// Runs the REST API and dashboard.
    #[command(after_help = CONNECTION_HELP)]
    Api(ApiArgs),
    /// Runs a worker (`chime worker drain ID` asks a running one to drain).
    #[command(after_help = CONNECTION_HELP)]
    Worker(WorkerArgs),
    /// Runs a scheduler instance (trigger firing); run as many as you like.
    #[command(after_help = CONNECTION_HELP)]
    Scheduler(ServiceArgs),
    /// Runs a dependency service (advances downstream jobs, backfills); run as many as you like.
    #[command(after_help = CONNECTION_HELP)]
    Dependency(ServiceArgs),
    /// Applies the database migrations (creating the database if needed).
    #[command(after_help = CONNECTION_HELP)]
    Migrate(MigrateArgs),
    /// Imports another scheduler's store: `chime import quartz --from URL`.
    #[command(subcommand, after_help = CONNECTION_HELP)]
    Import(commands::import::ImportCommand),
    /// Submits an ad-hoc task and prints its id.
    Submit(commands::submit::SubmitArgs),
    /// Lists, shows, follows (logs), kills and re-runs tasks.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Creates, shows, runs, pauses and links jobs (dependencies).
    #[command(subcommand)]
    Job(commands::jobs::JobCommand),
    /// Creates, shows, pauses and deletes triggers.
    #[command(subcommand)]
    Trigger(commands::jobs::TriggerCommand),
    /// Creates, lists and deletes calendars.
    #[command(subcommand)]
    Calendar(commands::jobs::CalendarCommand),
    /// Lists every service instance (schedulers, dependency services, APIs), alive or dead, and
    /// names a kind with no live instance (workers: `chime workers`).
    #[command(alias = "schedulers")]
    Services {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks; each prints one machine-readable line.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The schedule engine, no server needed.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Checks definitions files (YAML) with no server, as the API would: every problem at its
    /// file:line:column.
    Validate(commands::definitions::ValidateArgs),
    /// Prints the JSON Schema of definitions files, for editors.
    Schema,
    /// Writes the store's definitions (not its history) as a definitions file (YAML).
    Export(commands::definitions::ExportArgs),
    /// Checks definitions files, then prints what applying them would change in the store:
    /// each object to make, change (each setting, before → after) or remove. Changes nothing
    /// (`chime apply --dry-run`).
    Plan(commands::definitions::ApplyArgs),
    /// Checks definitions files and applies them in one transaction: any error, and nothing
    /// changes. Prints each change; `--dry-run` only plans.
    Apply(commands::definitions::ApplyArgs),
    /// Lists workers.
    Workers {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Backfills a job (a task for every fire time of its triggers in a range); list, show and
    /// cancel backfills.
    Backfill(commands::jobs::BackfillCli),
    /// Routes job kinds to worker groups (`chime route set hive etl`).
    #[command(subcommand)]
    Route(RouteCommand),
    /// Declares, lists and deletes worker groups.
    #[command(subcommand)]
    Group(commands::groups::GroupCommand),
    /// Creates, lists and revokes API tokens (admin).
    #[command(subcommand)]
    Token(commands::access::TokenCommand),
    /// Adds, lists and removes failure webhooks (admin).
    #[command(subcommand)]
    Webhook(commands::webhooks::WebhookCommand),
    /// Removes ended tasks (with their attempts) and fired-trigger rows older than a cut (admin);
    /// schedulers do it hourly for `scheduler.retention_days`.
    Prune {
        /// The cut: 7d, 12h, 30m or 90s.
        #[arg(long, value_parser = commands::tasks::parse_age)]
        older_than: u64,
        /// Only count what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Writes the book's generated reference and the man pages (for the project's own use).
    #[command(hide = true)]
    Docs(commands::docs::DocsArgs),
    /// Shows the audit trail: who changed what (admin).
    Audit {
        /// Only this token's changes.
        #[arg(long)]
        actor: Option<String>,
        /// Only changes to this object: `job default.export`, `trigger default.nightly`, or a
        /// name of any kind (`default.export`).
        #[arg(long)]
        target: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum RouteCommand {
    /// Sends tasks and jobs of KIND without a group to GROUP.
    Set {
        /// The job kind.
        kind: String,
        /// The worker group.
        group: String,
    },
    /// Lists the routes.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Removes KIND's route.
    Delete {
        /// The job kind.
        kind: String,
    },
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
struct WorkerArgs {
    /// Worker groups to consume, comma-separated [env: CHIME_WORKER__GROUPS]
    #[arg(long, value_delimiter = ',')]
    groups: Option<Vec<String>>,
    /// Shell and command-template tasks a worker runs at once (each is a process)
    /// [env: CHIME_WORKER__CONCURRENCY]
    #[arg(long)]
    concurrency: Option<u16>,
    /// Noop and http tasks a worker runs at once (inside the worker; default 200)
    /// [env: CHIME_WORKER__INLINE_CONCURRENCY]
    #[arg(long)]
    inline_concurrency: Option<u16>,
    #[command(flatten)]
    service: ServiceArgs,
    #[command(subcommand)]
    action: Option<WorkerAction>,
}

#[derive(Debug, Subcommand)]
enum WorkerAction {
    /// Asks a running worker to drain: it stops taking work, returns what it has not started,
    /// finishes what runs (within its shutdown grace) and goes offline, as on SIGTERM.
    Drain {
        /// The worker: its name (as `chime workers` lists it), its id, or the start of its id.
        worker: String,
    },
}

/// `chime api`'s flags.
#[derive(Debug, Args)]
struct ApiArgs {
    /// Address the API listens on [env: CHIME_API_ADDR]
    #[arg(long)]
    api_addr: Option<String>,
    #[command(flatten)]
    service: ServiceArgs,
    /// Let the API listen beyond loopback with no token, e.g. behind a proxy that authenticates
    /// [env: CHIME_INSECURE_NO_AUTH]
    #[arg(long)]
    insecure_no_auth: bool,
}

/// The flags of `chime migrate`.
#[derive(Debug, Args)]
struct MigrateArgs {
    /// Also remove the broker bindings that earlier versions (before 2026-11-25) need, which
    /// send every task's events to the dependency service's queue. Only once no process of an
    /// earlier version runs: their jobs' events would no longer reach it.
    #[arg(long)]
    drop_old_bindings: bool,
}

/// The flags of a service without an API (scheduler, dependency, worker).
#[derive(Debug, Args)]
struct ServiceArgs {
    /// Serve this service's Prometheus metrics on ADDR, e.g. 127.0.0.1:9100
    /// [env: CHIME_METRICS_ADDR]
    #[arg(long)]
    metrics_addr: Option<String>,
}

impl From<&ApiArgs> for ServeArgs {
    fn from(a: &ApiArgs) -> Self {
        Self {
            api_addr: a.api_addr.clone(),
            insecure_no_auth: a.insecure_no_auth,
            metrics_addr: a.service.metrics_addr.clone(),
            ..Self::default()
        }
    }
}

impl From<&ServiceArgs> for ServeArgs {
    fn from(a: &ServiceArgs) -> Self {
        Self {
            metrics_addr: a.metrics_addr.clone(),
            ..Self::default()
        }
    }
}

impl From<&WorkerArgs> for ServeArgs {
    fn from(a: &WorkerArgs) -> Self {
        Self {
            groups: a.groups.clone(),
            concurrency: a.concurrency,
            inline_concurrency: a.inline_concurrency,
            metrics_addr: a.service.metrics_addr.clone(),
            ..Self::default()
        }
    }
}

/// `chime up`'s flags: every service's.
#[derive(Debug, Default, Args)]
struct ServeArgs {
    /// Address the API listens on [env: CHIME_API_ADDR]
    #[arg(long)]
    api_addr: Option<String>,
    /// Worker groups to consume, comma-separated [env: CHIME_WORKER__GROUPS]
    #[arg(long, value_delimiter = ',')]
    groups: Option<Vec<String>>,
    /// Shell and command-template tasks a worker runs at once (each is a process)
    /// [env: CHIME_WORKER__CONCURRENCY]
    #[arg(long)]
    concurrency: Option<u16>,
    /// Noop and http tasks a worker runs at once (inside the worker; default 200)
    /// [env: CHIME_WORKER__INLINE_CONCURRENCY]
    #[arg(long)]
    inline_concurrency: Option<u16>,
    /// Let the API listen beyond loopback with no token, e.g. behind a proxy that authenticates
    /// [env: CHIME_INSECURE_NO_AUTH]
    #[arg(long)]
    insecure_no_auth: bool,
    /// Also serve the metrics on ADDR (the API serves them on its own address too)
    /// [env: CHIME_METRICS_ADDR]
    #[arg(long)]
    metrics_addr: Option<String>,
    /// Run every service but the worker (`chime up` on a machine whose tasks run on other
    /// machines' workers)
    #[arg(long)]
    no_worker: bool,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// N one-shot triggers due at once, K scheduler instances: fires per second until all are
    /// published.
    Fire {
        /// How many triggers.
        #[arg(long, default_value_t = 20_000)]
        triggers: i64,
        /// How many scheduler instances.
        #[arg(long, default_value_t = 1)]
        schedulers: usize,
        /// Idle triggers (due in a year) in the store beside them: the scale benchmark.
        #[arg(long, default_value_t = 0)]
        idle_triggers: i64,
    },
    /// Fires at known times: lateness p50/p99/max of publish versus scheduled time.
    Lag {
        /// Fires per second.
        #[arg(long, default_value_t = 1000)]
        rate: i64,
        /// Seconds of load.
        #[arg(long, default_value_t = 10)]
        seconds: i64,
        /// How many scheduler instances.
        #[arg(long, default_value_t = 2)]
        schedulers: usize,
    },
    /// An idle cluster: time from creating a due trigger to its task's publish.
    Pickup {
        /// How many triggers, one at a time.
        #[arg(long, default_value_t = 20)]
        count: i64,
        /// How many scheduler instances.
        #[arg(long, default_value_t = 2)]
        schedulers: usize,
    },
    /// Upstream success to downstream publish over N data times: p50/p99/max.
    Deps {
        /// How many data times.
        #[arg(long, default_value_t = 1000)]
        data_times: usize,
        /// Upstream runs started per second.
        #[arg(long, default_value_t = 200.0)]
        rate: f64,
    },
    /// A worker process running N requests_recovery tasks is killed with SIGKILL: time from the
    /// kill to each re-run attempt's start on another worker (p50, max).
    Recovery {
        /// How many tasks the killed worker runs.
        #[arg(long, default_value_t = 10)]
        tasks: usize,
        /// Kill the worker 5 s after the only scheduler started (a rolling restart), instead of
        /// once the scheduler has run for over 20 s.
        #[arg(long)]
        fresh: bool,
    },
    /// N ad-hoc noop tasks end to end: tasks/s and submit-to-succeeded p50/p99.
    Tasks {
        /// How many tasks.
        #[arg(long, default_value_t = 20_000)]
        count: usize,
        /// Slots per worker (noop tasks run inline: its inline slots).
        #[arg(long, default_value_t = 200)]
        concurrency: u16,
        /// How many workers (each with its own connections).
        #[arg(long, default_value_t = 1)]
        workers: usize,
    },
    /// N noop submissions through one front door of a default `chime up` (started on its own
    /// database): submissions/s accepted and tasks/s end to end.
    Submit {
        /// The door: amqp (`<prefix>.submit`), http (single POST /api/v1/tasks), or batch
        /// (POST /api/v1/tasks/batch, 1,000 a request).
        #[arg(long)]
        via: chime_bench::submit::Via,
        /// How many submissions.
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        /// Concurrent HTTP clients (http and batch).
        #[arg(long, default_value_t = 16)]
        clients: usize,
    },
    /// A `chime up` under steady load (ad-hoc batches and per-second triggers): the slope of its
    /// resident memory against tasks finished after a warm-up, MB per million tasks (flat is 0).
    Soak {
        /// Ad-hoc noop tasks per second, through POST /api/v1/tasks/batch.
        #[arg(long, default_value_t = 1000)]
        rate: usize,
        /// Seconds of load.
        #[arg(long, default_value_t = 300)]
        seconds: u64,
        /// Triggers that fire every second beside them.
        #[arg(long, default_value_t = 50)]
        triggers: usize,
        /// Seconds before memory is fitted (pools, caches and the allocator settle).
        #[arg(long, default_value_t = 60)]
        warmup: u64,
    },
    /// Next-fire computations per second on one core.
    Schedule {
        /// How long to run.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
}

#[derive(Debug, Subcommand)]
enum ScheduleCommand {
    /// Prints a schedule's next fire times in its zone, naming the hours a clock change skips or
    /// repeats (--utc: one RFC 3339 UTC time per line).
    Preview(commands::schedule::PreviewArgs),
}

#[derive(Debug, Subcommand)]
enum TaskCommand {
    /// Lists the newest tasks (filters: status, job, worker group, kind, age; pages).
    List(commands::tasks::ListArgs),
    /// Prints a task's output (its latest attempt's, or --attempt N's); -f follows it while it runs.
    Logs {
        /// The task's id, or the start of it (8 characters or more) that only it has.
        id: String,
        /// Keep printing what the task adds until it ends.
        #[arg(short, long)]
        follow: bool,
        /// Which attempt (1 for the first); the latest by default.
        #[arg(long)]
        attempt: Option<i32>,
    },
    /// Shows a task and its attempts.
    Show {
        /// The task's id, or the start of it (8 characters or more) that only it has.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Re-runs a task that has ended (failed, killed or succeeded) as a new attempt; the
    /// downstream tasks that failed `upstream_failed` for the data times it feeds (through the
    /// whole DAG) wait again and run as their upstreams succeed.
    Rerun {
        /// The task's id, or the start of it that only it has (or --job for many).
        #[arg(required_unless_present = "job", conflicts_with = "job")]
        id: Option<String>,
        /// Also re-run every downstream task that had ended, succeeded ones too (Airflow's
        /// Clear → Downstream).
        #[arg(long)]
        downstream: bool,
        #[command(flatten)]
        bulk: commands::tasks::BulkArgs,
    },
    /// Kills a task: a running one's process group dies; a waiting, ready or retrying one is
    /// cancelled. Waits (up to 10 s) until a running task is recorded `killed`.
    Kill {
        /// The task's id, or the start of it that only it has (or --job for many).
        #[arg(required_unless_present = "job", conflicts_with = "job")]
        id: Option<String>,
        #[command(flatten)]
        bulk: commands::tasks::BulkArgs,
    },
}

/// `submit --wait`'s task ended other than succeeded: `chime` exits with `code`, the task's own.
#[derive(Debug)]
pub struct TaskEnded {
    /// The exit code.
    pub code: u8,
    /// What happened, printed after `error: `.
    pub message: String,
}

impl std::fmt::Display for TaskEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TaskEnded {}

/// Input the user must fix: exits 2 (like a usage error), not 1.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Not a failure: the command ends with this status and prints nothing more (`chime apply
/// --exit-code` when there are changes).
#[derive(Debug)]
pub struct ExitWith(pub u8);

impl std::fmt::Display for ExitWith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for ExitWith {}

/// Parses the command line and runs it; the binary's `main`.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // --help and --version are not errors.
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code: u8 = match runtime.block_on(run(cli)) {
        Ok(()) => 0,
        Err(error) if error.downcast_ref::<ExitWith>().is_some() => {
            error.downcast_ref::<ExitWith>().map_or(1, |e| e.0)
        }
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            if let Some(ended) = error.downcast_ref::<TaskEnded>() {
                ended.code
            } else if error.downcast_ref::<BadInput>().is_some() {
                2
            } else {
                1
            }
        }
    };
    // Everything that matters is committed or was refused by now. Dropping the runtime would
    // pull the reactor from under threads it does not own (lapin's I/O loop, still closing a
    // connection a refused start left), which then panic over the error just printed: the
    // process ends here instead, as it would have a moment later.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(i32::from(code))
}

/// An error and its causes, each said once: many errors (sqlx's among them) print their source
/// in their own message too, which `{:#}` would repeat.
fn error_chain(error: &anyhow::Error) -> String {
    let mut said: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        // A cause that an earlier error already printed in full, as its own tail.
        if text.is_empty() || said.iter().any(|earlier| earlier.ends_with(&text)) {
            continue;
        }
        said.push(text);
    }
    said.join(": ")
}

fn settings(global: &GlobalArgs, serve: Option<&ServeArgs>) -> Result<Settings> {
    Ok(Settings::load(Overrides {
        database_url: global.database_url.clone(),
        amqp_url: global.amqp_url.clone(),
        prefix: global.prefix.clone(),
        api_addr: serve.and_then(|s| s.api_addr.clone()),
        api_url: global.api_url.clone(),
        api_token: global.token.clone(),
        worker_groups: serve.and_then(|s| s.groups.clone()),
        worker_concurrency: serve.and_then(|s| s.concurrency),
        worker_inline_concurrency: serve.and_then(|s| s.inline_concurrency),
        insecure_no_auth: serve.and_then(|s| s.insecure_no_auth.then_some(true)),
        metrics_addr: serve.and_then(|s| s.metrics_addr.clone()),
        config_file: global.config.clone(),
    })?)
}

async fn run(cli: Cli) -> Result<()> {
    let global = &cli.global;
    let serving = matches!(
        cli.command,
        Command::Up(_)
            | Command::Api(_)
            | Command::Worker(WorkerArgs { action: None, .. })
            | Command::Scheduler(_)
            | Command::Dependency(_)
            | Command::Migrate(_)
    );
    if !serving {
        // A client verb piped into `head` should end quietly when the pipe closes, as Unix tools
        // do, not panic in println!. (Services keep Rust's ignored SIGPIPE: a peer closing a
        // socket must be an error to handle, not a signal that kills the process.)
        // SAFETY: at start-up, before any thread of ours relies on SIGPIPE's disposition.
        let _ = unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigDfl,
            )
        };
    }
    // lapin logs errors for benign events (a channel closing with its connection at shutdown, a
    // socket write that would block); real connection losses are logged by chime's own
    // supervisor.
    chime_core::telemetry::init_logging(if serving {
        "info,lapin::channel=off,lapin::channels=off,lapin::io_loop=off"
    } else {
        "warn,lapin::channel=off,lapin::channels=off,lapin::io_loop=off"
    });
    match cli.command {
        Command::Docs(ref args) => commands::docs::run(args),
        Command::Up(ref args) => {
            let services = Services {
                worker: !args.no_worker,
                ..Services::ALL
            };
            commands::services::run(settings(global, Some(args))?, services).await
        }
        Command::Api(ref args) => {
            let services = Services::API;
            commands::services::run(settings(global, Some(&args.into()))?, services).await
        }
        Command::Worker(WorkerArgs {
            action: Some(WorkerAction::Drain { ref worker }),
            ..
        }) => commands::workers::drain(&client(&settings(global, None)?)?, worker).await,
        Command::Worker(ref args) => {
            let services = Services::WORKER;
            commands::services::run(settings(global, Some(&args.into()))?, services).await
        }
        Command::Scheduler(ref args) => {
            commands::services::run(settings(global, Some(&args.into()))?, Services::SCHEDULER)
                .await
        }
        Command::Dependency(ref args) => {
            commands::services::run(settings(global, Some(&args.into()))?, Services::DEPENDENCY)
                .await
        }
        Command::Migrate(args) => {
            commands::services::migrate(&settings(global, None)?, args.drop_old_bindings).await
        }
        Command::Import(command) => commands::import::run(&settings(global, None)?, command).await,
        Command::Submit(args) => {
            commands::submit::run(&client(&settings(global, None)?)?, args).await
        }
        Command::Task(TaskCommand::List(args)) => {
            commands::tasks::list(&client(&settings(global, None)?)?, args).await
        }
        Command::Task(TaskCommand::Logs {
            id,
            follow,
            attempt,
        }) => {
            let client = client(&settings(global, None)?)?;
            let id = commands::tasks::resolve(&client, &id).await?;
            commands::tasks::logs(&client, id, attempt, follow).await
        }
        Command::Task(TaskCommand::Show { id, json }) => {
            let client = client(&settings(global, None)?)?;
            let id = commands::tasks::resolve(&client, &id).await?;
            commands::tasks::show(&client, id, json).await
        }
        Command::Task(TaskCommand::Kill { id, bulk }) => {
            let client = client(&settings(global, None)?)?;
            match id {
                Some(id) => {
                    let id = commands::tasks::resolve(&client, &id).await?;
                    commands::tasks::kill(&client, id).await
                }
                None => commands::tasks::bulk(&client, "kill", bulk, false).await,
            }
        }
        Command::Task(TaskCommand::Rerun {
            id,
            downstream,
            bulk,
        }) => {
            let client = client(&settings(global, None)?)?;
            match id {
                Some(id) => {
                    let id = commands::tasks::resolve(&client, &id).await?;
                    commands::tasks::rerun(&client, id, downstream).await
                }
                None => commands::tasks::bulk(&client, "rerun", bulk, downstream).await,
            }
        }
        Command::Backfill(args) => {
            commands::jobs::backfills(&client(&settings(global, None)?)?, args).await
        }
        Command::Schedule(ScheduleCommand::Preview(args)) => commands::schedule::run(args),
        Command::Validate(args) => commands::definitions::validate(args),
        Command::Schema => commands::definitions::schema(),
        Command::Plan(args) => {
            let args = commands::definitions::ApplyArgs {
                dry_run: true,
                ..args
            };
            commands::definitions::apply(&client(&settings(global, None)?)?, args).await
        }
        Command::Apply(args) => {
            commands::definitions::apply(&client(&settings(global, None)?)?, args).await
        }
        Command::Export(args) => {
            commands::definitions::export(&client(&settings(global, None)?)?, args).await
        }
        Command::Bench(BenchCommand::Fire {
            triggers,
            schedulers,
            idle_triggers,
        }) => {
            if triggers < 1 || schedulers == 0 || idle_triggers < 0 {
                return Err(BadInput(
                    "--triggers and --schedulers must be at least 1, --idle-triggers 0 or more"
                        .into(),
                )
                .into());
            }
            let figures = chime_bench::fire::run(
                &settings(global, None)?,
                triggers,
                schedulers,
                idle_triggers,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Lag {
            rate,
            seconds,
            schedulers,
        }) => {
            let figures =
                chime_bench::lag::run(&settings(global, None)?, rate, seconds, schedulers)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Pickup { count, schedulers }) => {
            let figures = chime_bench::pickup::run(&settings(global, None)?, count, schedulers)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Recovery { tasks, fresh }) => {
            if tasks == 0 || tasks > 1000 {
                return Err(BadInput("--tasks must be between 1 and 1000".into()).into());
            }
            let figures = chime_bench::recovery::run(&settings(global, None)?, tasks, fresh)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Tasks {
            count,
            concurrency,
            workers,
        }) => {
            if count == 0 || concurrency == 0 || workers == 0 {
                return Err(BadInput(
                    "--count, --concurrency and --workers must be at least 1".into(),
                )
                .into());
            }
            let figures =
                chime_bench::tasks::run(&settings(global, None)?, count, concurrency, workers)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Submit {
            via,
            count,
            clients,
        }) => {
            if count == 0 || clients == 0 {
                return Err(BadInput("--count and --clients must be at least 1".into()).into());
            }
            let figures = chime_bench::submit::run(&settings(global, None)?, via, count, clients)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Deps { data_times, rate }) => {
            if data_times == 0 || !(rate > 0.0 && rate.is_finite()) {
                return Err(BadInput("--data-times and --rate must be positive".into()).into());
            }
            let figures = chime_bench::deps::run(&settings(global, None)?, data_times, rate)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Soak {
            rate,
            seconds,
            triggers,
            warmup,
        }) => {
            if !(10..=10_000).contains(&rate)
                || warmup.saturating_add(30) > seconds
                || triggers > 10_000
            {
                return Err(BadInput(
                    "--rate must be between 10 and 10000, --seconds at least --warmup + 30, \
                     --triggers at most 10000"
                        .into(),
                )
                .into());
            }
            let figures =
                chime_bench::soak::run(&settings(global, None)?, rate, seconds, triggers, warmup)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", figures.line());
            Ok(())
        }
        Command::Bench(BenchCommand::Schedule { seconds }) => {
            let seconds = std::time::Duration::try_from_secs_f64(seconds)
                .map_err(|e| BadInput(format!("--seconds: {e}")))?;
            println!("{}", chime_bench::schedule::run(seconds).line());
            Ok(())
        }
        Command::Job(command) => {
            commands::jobs::job(&client(&settings(global, None)?)?, command).await
        }
        Command::Trigger(command) => {
            commands::jobs::trigger(&client(&settings(global, None)?)?, command).await
        }
        Command::Calendar(command) => {
            commands::jobs::calendar(&client(&settings(global, None)?)?, command).await
        }
        Command::Services { json } => {
            commands::jobs::services(&client(&settings(global, None)?)?, json).await
        }
        Command::Workers { json } => {
            commands::workers::list(&client(&settings(global, None)?)?, json).await
        }
        Command::Route(command) => {
            let client = client(&settings(global, None)?)?;
            match command {
                RouteCommand::Set { kind, group } => {
                    commands::workers::set_route(&client, &kind, &group).await
                }
                RouteCommand::List { json } => commands::workers::list_routes(&client, json).await,
                RouteCommand::Delete { kind } => {
                    commands::workers::delete_route(&client, &kind).await
                }
            }
        }
        Command::Group(command) => {
            commands::groups::group(&client(&settings(global, None)?)?, command).await
        }
        Command::Webhook(command) => {
            commands::webhooks::webhook(&client(&settings(global, None)?)?, command).await
        }
        Command::Token(command) => {
            commands::access::token(&client(&settings(global, None)?)?, command).await
        }
        Command::Prune {
            older_than,
            dry_run,
        } => commands::tasks::prune(&client(&settings(global, None)?)?, older_than, dry_run).await,
        Command::Audit {
            actor,
            target,
            limit,
            json,
        } => {
            commands::access::audit(
                &client(&settings(global, None)?)?,
                actor,
                target,
                limit,
                json,
            )
            .await
        }
    }
}

fn client(settings: &Settings) -> Result<ApiClient> {
    ApiClient::new(&settings.api_url, settings.api_token.clone())
}
