//! `chime job|trigger|calendar …` and `chime schedulers`: what fires, when, and who fires it.

use anyhow::Result;
use chime_core::schedule::ScheduleSpec;
use chime_core::schedule::misfire::MisfirePolicy;
use chime_core::store::calendars::NamedCalendar;
use chime_core::store::jobs::{JobUpdate, JobView, NewJob};
use chime_core::store::patch::Change;
use chime_core::store::services::ServiceView;
use chime_core::store::triggers::{NewTrigger, TriggerUpdate, TriggerView};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::BadInput;
use crate::client::ApiClient;
use crate::output::{opt, table, time};

/// `chime job …`
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Creates a job.
    Create(JobCreate),
    /// Changes the settings given and keeps the rest (--replace: replaces them all); prints
    /// each setting changed.
    Update {
        #[command(flatten)]
        job: JobCreate,
        /// Replace every setting: those not given return to their defaults.
        #[arg(long)]
        replace: bool,
    },
    /// Lists jobs.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shows a job: its settings, triggers with their next fires (in each trigger's zone),
    /// dependencies both ways and recent runs (--json for scripts).
    Show {
        #[command(flatten)]
        job: Named,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pauses every trigger of the job.
    Pause(Named),
    /// Resumes the job's triggers.
    Resume(Named),
    /// Deletes the job and its triggers (its tasks stay); refused while other jobs depend on it.
    Delete {
        #[command(flatten)]
        job: Named,
        /// Also remove the dependencies other jobs have on it.
        #[arg(long)]
        force: bool,
    },
    /// Makes the job depend on another: its task for a data time waits for the upstream's.
    Depend {
        #[command(flatten)]
        job: Named,
        /// The upstream job.
        #[arg(long)]
        on: String,
        /// The upstream job's group.
        #[arg(long, default_value = "default")]
        on_group: String,
        /// `same` (the upstream's task for the same data time) or `period` (every upstream run
        /// within this job's data-time period).
        #[arg(long, value_parser = ["same", "period"])]
        window: Option<String>,
        /// `fail` (fail with the upstream) or `wait` (wait for the upstream to be re-run).
        #[arg(long, value_parser = ["fail", "wait"])]
        on_upstream_failure: Option<String>,
    },
    /// Removes the job's dependency on another.
    Undepend {
        #[command(flatten)]
        job: Named,
        /// The upstream job.
        #[arg(long)]
        on: String,
        /// The upstream job's group.
        #[arg(long, default_value = "default")]
        on_group: String,
    },
    /// Runs the job now; prints the task id.
    Run {
        #[command(flatten)]
        job: Named,
        /// Data added to the job's, as JSON.
        #[arg(long)]
        data: Option<String>,
        /// The data time (RFC 3339; default now).
        #[arg(long)]
        data_time: Option<jiff::Timestamp>,
    },
}

/// A job or trigger by name (and group).
#[derive(Debug, Args)]
pub struct Named {
    /// Its name.
    name: String,
    /// Its group.
    #[arg(long, default_value = "default")]
    group: String,
}

impl Named {
    fn path(&self, collection: &str) -> String {
        format!(
            "/api/v1/{collection}/{}/{}",
            super::path_segment(&self.group),
            super::path_segment(&self.name)
        )
    }
}

/// `chime job create NAME --kind shell -- CMD …`
#[derive(Debug, Args)]
pub struct JobCreate {
    /// The job's name.
    name: String,
    /// Its group.
    #[arg(long)]
    group: Option<String>,
    /// Executor kind (required to create).
    #[arg(long)]
    kind: Option<String>,
    /// The executor's input as JSON.
    #[arg(long)]
    spec: Option<String>,
    /// A script for `sh -c` (shell kind).
    #[arg(long)]
    script: Option<String>,
    /// The directory the command runs in, on the worker (shell kind, given with its command;
    /// default: the worker's own directory). An update given a command replaces the whole spec:
    /// give --cwd again to keep one.
    #[arg(long)]
    cwd: Option<String>,
    /// Worker group.
    #[arg(long)]
    worker_group: Option<String>,
    /// Allow only one task at a time.
    #[arg(long, conflicts_with = "concurrent")]
    no_concurrent: bool,
    /// Allow tasks to overlap (the default; for an update).
    #[arg(long)]
    concurrent: bool,
    /// Re-run a task whose worker died.
    #[arg(long, conflicts_with = "no_requests_recovery")]
    requests_recovery: bool,
    /// Do not re-run a task whose worker died (the default; for an update).
    #[arg(long)]
    no_requests_recovery: bool,
    /// Timeout of one attempt, in milliseconds.
    #[arg(long)]
    timeout_ms: Option<i64>,
    /// minute, hour, day, week or month: the job's data times are truncated to it (in
    /// --data-time-zone).
    #[arg(long, value_parser = ["minute", "hour", "day", "week", "month"])]
    data_time_period: Option<String>,
    /// The IANA zone of the data-time period (default UTC): a daily job in Asia/Shanghai has
    /// its data times at local midnight.
    #[arg(long)]
    data_time_zone: Option<String>,
    /// Keep this job's ended tasks this many days (default: scheduler.retention_days).
    #[arg(long)]
    retention_days: Option<i32>,
    /// Tell the webhooks when the job has not succeeded for this long (25h, 90m; 0s: never),
    /// once per missed deadline.
    #[arg(long, value_parser = super::tasks::parse_age)]
    expect_success_within: Option<u64>,
    /// Failed attempts to retry (the failed budget; default 0).
    #[arg(long)]
    failed_retries: Option<i32>,
    /// Wait before retrying a failed attempt, in milliseconds (default 3000).
    #[arg(long)]
    failed_interval_ms: Option<i64>,
    /// Rejected attempts to retry (the reject budget; default 0).
    #[arg(long)]
    reject_retries: Option<i32>,
    /// Wait before retrying a rejected attempt, in milliseconds (default 3000).
    #[arg(long)]
    reject_interval_ms: Option<i64>,
    /// How the failed interval grows: `fixed`, `exponential`, or JSON such as
    /// '{"kind":"exponential","factor":2,"max_interval_ms":60000,"jitter":0.1}'.
    #[arg(long)]
    backoff: Option<String>,
    /// Priority of its tasks (higher first; default 5).
    #[arg(long)]
    priority: Option<i32>,
    /// Data passed to every task, as JSON; @FILE reads a file.
    #[arg(long)]
    data: Option<String>,
    /// The OS user its tasks run as.
    #[arg(long)]
    execute_user: Option<String>,
    /// What the job is for.
    #[arg(long)]
    description: Option<String>,
    /// The command (shell kind), after `--`.
    #[arg(last = true)]
    command: Vec<String>,
}

/// `chime trigger …`
#[derive(Debug, Subcommand)]
pub enum TriggerCommand {
    /// Creates a trigger.
    Create(TriggerCreate),
    /// Changes the settings given and keeps the rest (a new schedule or calendar restarts it
    /// from its new first fire; --replace: replaces them all); prints each setting changed.
    Update {
        #[command(flatten)]
        trigger: TriggerCreate,
        /// Replace every setting: those not given return to their defaults.
        #[arg(long)]
        replace: bool,
    },
    /// Lists triggers.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shows a trigger and its next fire times.
    Show {
        #[command(flatten)]
        trigger: Named,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// How many next fire times to list (0 to 1000).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(0..=1000))]
        count: u16,
    },
    /// Pauses a trigger.
    Pause(Named),
    /// Resumes a trigger.
    Resume(Named),
    /// Deletes a trigger.
    Delete(Named),
    /// Pauses every trigger of a group, and those added to it while paused.
    PauseGroup {
        /// The group.
        group: String,
    },
    /// Resumes a trigger group.
    ResumeGroup {
        /// The group.
        group: String,
    },
}

/// `chime trigger create NAME --job JOB (--cron EXPR [--tz ZONE] | --every 30s | --schedule JSON)`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").args(["schedule", "cron", "every"])))]
pub struct TriggerCreate {
    /// The trigger's name.
    name: String,
    /// Its group.
    #[arg(long)]
    group: Option<String>,
    /// The job it fires (required to create).
    #[arg(long)]
    job: Option<String>,
    /// The job's group.
    #[arg(long)]
    job_group: Option<String>,
    /// The schedule as JSON (see the book: docs/src/concepts/triggers-and-schedules.md), e.g.
    /// '{"kind":"cron","cron":"0 */5 * * * ?"}'.
    #[arg(long)]
    schedule: Option<String>,
    /// A cron expression (Quartz with seconds, or Unix with five fields), e.g. '0 */5 * * * ?'.
    #[arg(long)]
    cron: Option<String>,
    /// The cron expression's time zone (IANA, default UTC).
    #[arg(long, requires = "cron")]
    tz: Option<String>,
    /// A fixed interval from now, for ever: 30s, 5m, 1h, 1d.
    #[arg(long, value_parser = super::tasks::parse_age)]
    every: Option<u64>,
    /// An exclusion calendar by name.
    #[arg(long)]
    calendar: Option<String>,
    /// smart, fire_now, skip, fire_all, reschedule_… (simple triggers).
    #[arg(long)]
    misfire: Option<String>,
    /// Higher fires first.
    #[arg(long)]
    priority: Option<i32>,
}

/// `chime calendar …`
#[derive(Debug, Subcommand)]
pub enum CalendarCommand {
    /// Creates a calendar.
    Create {
        /// Its name.
        name: String,
        /// The calendar as JSON (see the book: docs/src/concepts/calendars.md).
        #[arg(long)]
        definition: String,
    },
    /// Replaces a calendar's definition.
    Update {
        /// Its name.
        name: String,
        /// The calendar as JSON (see the book: docs/src/concepts/calendars.md).
        #[arg(long)]
        definition: String,
    },
    /// Lists calendars.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Deletes a calendar no trigger uses.
    Delete {
        /// Its name.
        name: String,
    },
}

fn json_arg<T: serde::de::DeserializeOwned>(flag: &str, text: &str) -> Result<T> {
    Ok(serde_json::from_str(text).map_err(|e| BadInput(format!("{flag}: {e}")))?)
}

/// Runs a job verb.
pub async fn job(client: &ApiClient, command: JobCommand) -> Result<()> {
    match command {
        JobCommand::Update { job, replace } => {
            let group = job.group.clone().unwrap_or_else(|| "default".into());
            let path = format!(
                "/api/v1/jobs/{}/{}",
                super::path_segment(&group),
                super::path_segment(&job.name)
            );
            let update: JobUpdate = if replace {
                // PUT answers with the job alone: what changed is read from the job before.
                let before: JobView = client.get(&path).await?;
                let after: JobView = client.put(&path, &new_job(job)?).await?;
                let settings = |view: &JobView| {
                    let mut value = serde_json::to_value(view).unwrap_or_default();
                    if let Some(fields) = value.as_object_mut() {
                        for derived in ["id", "paused", "triggers", "next_fire_time", "last_run"] {
                            fields.remove(derived);
                        }
                    }
                    value
                };
                JobUpdate {
                    changes: chime_core::store::patch::changes(
                        &settings(&before),
                        &settings(&after),
                    ),
                    job: after,
                }
            } else {
                client.patch(&path, &job_patch(&job)?).await?
            };
            print_update(
                &format!("{}.{}", update.job.group, update.job.name),
                &update.changes,
            );
        }
        JobCommand::Create(args) => {
            let job = new_job(args)?;
            let (_, view): (_, JobView) = client.post("/api/v1/jobs", &job).await?;
            println!("{}.{}", view.group, view.name);
        }
        JobCommand::List { json } => {
            let jobs: Vec<JobView> = client.get("/api/v1/jobs").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&jobs)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = jobs
                .iter()
                .map(|j| {
                    vec![
                        format!("{}.{}", j.group, j.name),
                        j.kind.clone(),
                        j.worker_group.clone(),
                        j.concurrent.to_string(),
                        j.paused.to_string(),
                    ]
                })
                .collect();
            table(
                &["JOB", "KIND", "WORKER GROUP", "CONCURRENT", "PAUSED"],
                &rows,
            );
        }
        JobCommand::Show { job, json } => show_job(client, &job, json).await?,
        JobCommand::Depend {
            job,
            on,
            on_group,
            window,
            on_upstream_failure,
        } => {
            let (_, view): (_, serde_json::Value) = client
                .post(
                    &format!("{}/dependencies", job.path("jobs")),
                    &json!({ "upstream": on, "upstream_group": on_group, "window": window,
                             "on_upstream_failure": on_upstream_failure }),
                )
                .await?;
            println!(
                "{} depends on {} (window {}, on upstream failure {})",
                view["job"].as_str().unwrap_or_default(),
                view["upstream"].as_str().unwrap_or_default(),
                view["window"].as_str().unwrap_or_default(),
                view["on_upstream_failure"].as_str().unwrap_or_default()
            );
        }
        JobCommand::Undepend { job, on, on_group } => {
            client
                .delete(&format!(
                    "{}/dependencies/{}/{}",
                    job.path("jobs"),
                    super::path_segment(&on_group),
                    super::path_segment(&on)
                ))
                .await?
        }
        JobCommand::Pause(job) => changed(client, &format!("{}/pause", job.path("jobs"))).await?,
        JobCommand::Resume(job) => changed(client, &format!("{}/resume", job.path("jobs"))).await?,
        JobCommand::Delete { job, force } => {
            let query = if force { "?force=true" } else { "" };
            client
                .delete(&format!("{}{query}", job.path("jobs")))
                .await?
        }
        JobCommand::Run {
            job,
            data,
            data_time,
        } => {
            let data: serde_json::Value = match data {
                Some(data) => json_arg("--data", &data)?,
                None => json!({}),
            };
            let (_, run): (_, serde_json::Value) = client
                .post(
                    &format!("{}/run", job.path("jobs")),
                    &json!({ "data": data, "data_time": data_time }),
                )
                .await?;
            println!("{}", run["task_id"].as_str().unwrap_or_default());
            // A run by hand starts at once, as Airflow's "trigger DAG" does for its first task:
            // say so where the job has upstreams, which its scheduled runs wait for.
            let deps: Result<chime_core::store::dependencies::JobDependencies> = client
                .get(&format!("{}/dependencies", job.path("jobs")))
                .await;
            if let Ok(deps) = deps
                && !deps.upstreams.is_empty()
            {
                let upstreams: Vec<&str> =
                    deps.upstreams.iter().map(|d| d.upstream.as_str()).collect();
                eprintln!(
                    "note: this run does not wait for {} (a run by hand starts at once; the \
                     job's own runs wait for their upstreams); its downstream jobs wait for it",
                    upstreams.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// Runs a trigger verb.
pub async fn trigger(client: &ApiClient, command: TriggerCommand) -> Result<()> {
    match command {
        TriggerCommand::Update { trigger, replace } => {
            let group = trigger.group.clone().unwrap_or_else(|| "default".into());
            let path = format!(
                "/api/v1/triggers/{}/{}",
                super::path_segment(&group),
                super::path_segment(&trigger.name)
            );
            let view: TriggerView = if replace {
                client.put(&path, &new_trigger(trigger)?).await?
            } else {
                let update: TriggerUpdate = client.patch(&path, &trigger_patch(&trigger)?).await?;
                print_update(
                    &format!("{}.{}", update.trigger.group, update.trigger.name),
                    &update.changes,
                );
                update.trigger
            };
            println!(
                "{}.{} next fire {}",
                view.group,
                view.name,
                time(view.next_fire_time)
            );
        }
        TriggerCommand::Create(args) => {
            let trigger = new_trigger(args)?;
            let (_, view): (_, TriggerView) = client.post("/api/v1/triggers", &trigger).await?;
            println!(
                "{}.{} next fire {}",
                view.group,
                view.name,
                time(view.next_fire_time)
            );
        }
        TriggerCommand::List { json } => {
            let triggers: Vec<TriggerView> = client.get("/api/v1/triggers").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&triggers)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = triggers
                .iter()
                .map(|t| {
                    vec![
                        format!("{}.{}", t.group, t.name),
                        format!("{}.{}", t.job_group, t.job),
                        t.state.clone(),
                        time(t.next_fire_time),
                        time(t.prev_fire_time),
                        t.times_triggered.to_string(),
                    ]
                })
                .collect();
            table(
                &[
                    "TRIGGER",
                    "JOB",
                    "STATE",
                    "NEXT FIRE",
                    "PREVIOUS FIRE",
                    "FIRED",
                ],
                &rows,
            );
        }
        TriggerCommand::Pause(t) => {
            changed(client, &format!("{}/pause", t.path("triggers"))).await?
        }
        TriggerCommand::Resume(t) => {
            changed(client, &format!("{}/resume", t.path("triggers"))).await?
        }
        TriggerCommand::Delete(t) => client.delete(&t.path("triggers")).await?,
        TriggerCommand::PauseGroup { group } => {
            changed(
                client,
                &format!(
                    "/api/v1/trigger-groups/{}/pause",
                    super::path_segment(&group)
                ),
            )
            .await?
        }
        TriggerCommand::ResumeGroup { group } => {
            changed(
                client,
                &format!(
                    "/api/v1/trigger-groups/{}/resume",
                    super::path_segment(&group)
                ),
            )
            .await?
        }
        TriggerCommand::Show {
            trigger,
            json,
            count,
        } => {
            let t: TriggerView = client
                .get_with(&trigger.path("triggers"), &[("count", count.to_string())])
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&t)?);
                return Ok(());
            }
            let field = |k: &str, v: String| println!("{k:<15} {v}");
            field("trigger", format!("{}.{}", t.group, t.name));
            field("job", format!("{}.{}", t.job_group, t.job));
            field("schedule", serde_json::to_string(&t.schedule)?);
            field("calendar", opt(t.calendar.as_deref()));
            field("misfire policy", t.misfire_policy.to_string());
            field("state", t.state.clone());
            field("fired", t.times_triggered.to_string());
            field("previous fire", time(t.prev_fire_time));
            let zone = t.schedule.time_zone();
            println!("next fires ({zone}):");
            for fire in &t.next_fires {
                match fire.parse::<jiff::Timestamp>() {
                    Ok(at) => println!("  {}", crate::output::time_in(at, zone)),
                    Err(_) => println!("  {fire}"),
                }
            }
        }
    }
    Ok(())
}

/// The settings `chime trigger update` was given, as a merge patch.
fn trigger_patch(args: &TriggerCreate) -> Result<serde_json::Value> {
    let mut patch = serde_json::Map::new();
    if let Some(schedule) = trigger_schedule(args)? {
        patch.insert("schedule".into(), serde_json::to_value(schedule)?);
    }
    if let Some(job) = &args.job {
        patch.insert("job".into(), json!(job));
    }
    if let Some(group) = &args.job_group {
        patch.insert("job_group".into(), json!(group));
    }
    if let Some(calendar) = trigger_calendar(args)? {
        patch.insert("calendar".into(), json!(calendar));
    }
    if let Some(policy) = trigger_misfire(args)? {
        patch.insert("misfire_policy".into(), serde_json::to_value(policy)?);
    }
    if let Some(priority) = args.priority {
        patch.insert("priority".into(), json!(priority));
    }
    if patch.is_empty() {
        return Err(BadInput(
            "give at least one setting to change (chime trigger update --help lists them), \
             or --replace"
                .into(),
        )
        .into());
    }
    Ok(serde_json::Value::Object(patch))
}

fn trigger_misfire(args: &TriggerCreate) -> Result<Option<MisfirePolicy>> {
    Ok(args
        .misfire
        .as_deref()
        .map(str::parse::<MisfirePolicy>)
        .transpose()
        .map_err(|e| BadInput(e.to_string()))?)
}

fn trigger_calendar(args: &TriggerCreate) -> Result<Option<String>> {
    match &args.calendar {
        Some(json) if json.trim_start().starts_with('{') => Err(BadInput(format!(
            "--calendar {json}: give a stored calendar's name; make one first with \
             `chime calendar create NAME --definition JSON`"
        ))
        .into()),
        other => Ok(other.clone()),
    }
}

fn trigger_schedule(args: &TriggerCreate) -> Result<Option<ScheduleSpec>> {
    Ok(Some(match (&args.schedule, &args.cron, args.every) {
        (Some(schedule), _, _) => json_arg("--schedule", schedule)?,
        (None, Some(cron), _) => ScheduleSpec::Cron {
            cron: cron.clone(),
            time_zone: args.tz.clone(),
            start_time: None,
            end_time: None,
        },
        (None, None, Some(seconds)) => {
            let interval_ms = seconds
                .checked_mul(1000)
                .and_then(|ms| i64::try_from(ms).ok())
                .filter(|ms| *ms > 0)
                .ok_or_else(|| BadInput("--every must be at least 1s".into()))?;
            ScheduleSpec::Simple {
                interval_ms,
                repeat_count: -1,
                start_time: None,
                end_time: None,
            }
        }
        (None, None, None) => return Ok(None),
    }))
}

fn new_trigger(args: TriggerCreate) -> Result<NewTrigger> {
    let Some(schedule) = trigger_schedule(&args)? else {
        return Err(BadInput("give --cron, --every or --schedule".into()).into());
    };
    let Some(job) = args.job.clone() else {
        return Err(BadInput("--job is required: the job the trigger fires".into()).into());
    };
    Ok(NewTrigger {
        calendar: trigger_calendar(&args)?,
        misfire_policy: trigger_misfire(&args)?,
        group: args.group,
        name: args.name,
        job_group: args.job_group,
        job,
        schedule,
        priority: args.priority,
        description: None,
        data: serde_json::Value::Null,
    })
}

/// Prints what an update changed, one setting a line.
fn print_update(name: &str, changes: &[Change]) {
    if changes.is_empty() {
        println!("{name}: nothing changed");
    }
    for change in changes {
        println!(
            "{name}: {} {} → {}",
            change.field, change.before, change.after
        );
    }
}

/// `timeout_ms: 1000 → 60000; description: "a" → null`.
pub fn describe_changes(changes: &[Change]) -> String {
    changes
        .iter()
        .map(|c| format!("{}: {} → {}", c.field, c.before, c.after))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The settings `chime job update` was given, as a merge patch.
fn job_patch(args: &JobCreate) -> Result<serde_json::Value> {
    let mut patch = serde_json::Map::new();
    let mut set = |field: &str, value: serde_json::Value| {
        patch.insert(field.to_string(), value);
    };
    if args.spec.is_some()
        || args.script.is_some()
        || args.cwd.is_some()
        || !args.command.is_empty()
    {
        set("spec", job_spec(args)?);
    }
    if let Some(kind) = &args.kind {
        set("kind", json!(kind));
    }
    if let Some(description) = &args.description {
        set("description", json!(description));
    }
    if let Some(group) = &args.worker_group {
        set("worker_group", json!(group));
    }
    if args.no_concurrent || args.concurrent {
        set("concurrent", json!(args.concurrent));
    }
    if args.requests_recovery || args.no_requests_recovery {
        set("requests_recovery", json!(args.requests_recovery));
    }
    for (field, value) in [
        ("timeout_ms", args.timeout_ms),
        ("failed_interval_ms", args.failed_interval_ms),
        ("reject_interval_ms", args.reject_interval_ms),
    ] {
        if let Some(value) = value {
            set(field, json!(value));
        }
    }
    for (field, value) in [
        ("retention_days", args.retention_days),
        ("failed_retries", args.failed_retries),
        ("reject_retries", args.reject_retries),
        ("priority", args.priority),
    ] {
        if let Some(value) = value {
            set(field, json!(value));
        }
    }
    for (field, value) in [
        ("data_time_period", &args.data_time_period),
        ("data_time_zone", &args.data_time_zone),
        ("execute_user", &args.execute_user),
    ] {
        if let Some(value) = value {
            set(field, json!(value));
        }
    }
    if let Some(seconds) = args.expect_success_within {
        set(
            "expect_success_within_ms",
            json!(expect_within_ms(seconds)?),
        );
    }
    if let Some(backoff) = &args.backoff {
        set(
            "backoff",
            serde_json::to_value(super::submit::backoff_arg(backoff)?)?,
        );
    }
    if let Some(data) = &args.data {
        set("data", super::submit::json_arg("--data", data)?);
    }
    if patch.is_empty() {
        return Err(BadInput(
            "give at least one setting to change (chime job update --help lists them), or \
             --replace"
                .into(),
        )
        .into());
    }
    Ok(serde_json::Value::Object(patch))
}

fn job_spec(args: &JobCreate) -> Result<serde_json::Value> {
    let mut spec = command_spec(args)?;
    if let Some(cwd) = &args.cwd {
        match spec.as_object_mut() {
            Some(fields) if fields.contains_key("command") => {
                fields.insert("cwd".into(), json!(cwd));
            }
            _ => {
                return Err(BadInput(
                    "--cwd is for a shell job's command: give it with the command (after --, \
                     or --script)"
                        .into(),
                )
                .into());
            }
        }
    }
    Ok(spec)
}

fn command_spec(args: &JobCreate) -> Result<serde_json::Value> {
    Ok(match (&args.spec, &args.script, args.command.is_empty()) {
        (Some(spec), None, true) => json_arg("--spec", spec)?,
        (None, Some(script), true) => json!({ "command": script }),
        (None, None, false) => json!({ "command": args.command }),
        (None, None, true) => json!({}),
        _ => {
            return Err(
                BadInput("give one of --spec, --script or a command after --".into()).into(),
            );
        }
    })
}

fn new_job(args: JobCreate) -> Result<NewJob> {
    let spec = job_spec(&args)?;
    let Some(kind) = args.kind else {
        return Err(BadInput(
            "--kind is required: shell, http, noop, or a kind routed to a worker group".into(),
        )
        .into());
    };
    Ok(NewJob {
        group: args.group,
        name: args.name,
        kind,
        spec,
        worker_group: args.worker_group,
        concurrent: Some(!args.no_concurrent),
        requests_recovery: Some(args.requests_recovery),
        timeout_ms: args.timeout_ms,
        data_time_period: args.data_time_period,
        data_time_zone: args.data_time_zone,
        retention_days: args.retention_days,
        failed_retries: args.failed_retries,
        failed_interval_ms: args.failed_interval_ms,
        reject_retries: args.reject_retries,
        reject_interval_ms: args.reject_interval_ms,
        backoff: args
            .backoff
            .as_deref()
            .map(super::submit::backoff_arg)
            .transpose()?,
        priority: args.priority,
        data: match &args.data {
            Some(data) => super::submit::json_arg("--data", data)?,
            None => serde_json::Value::Null,
        },
        execute_user: args.execute_user,
        description: args.description,
        expect_success_within_ms: match args.expect_success_within {
            Some(seconds) => expect_within_ms(seconds)?,
            None => None,
        },
    })
}

/// `--expect-success-within` in milliseconds; `0s` (no window) is none.
fn expect_within_ms(seconds: u64) -> Result<Option<i64>> {
    match seconds {
        0 => Ok(None),
        s => s
            .checked_mul(1000)
            .and_then(|ms| i64::try_from(ms).ok())
            .map(Some)
            .ok_or_else(|| {
                BadInput("--expect-success-within: give at most ten years (520w)".into()).into()
            }),
    }
}

/// A pause or resume; prints how many triggers changed.
async fn changed(client: &ApiClient, path: &str) -> Result<()> {
    let (_, answer): (_, serde_json::Value) = client.post(path, &json!({})).await?;
    println!("{} trigger(s) changed", answer["triggers"]);
    Ok(())
}

/// Runs a calendar verb.
pub async fn calendar(client: &ApiClient, command: CalendarCommand) -> Result<()> {
    match command {
        CalendarCommand::Create { name, definition } => {
            let calendar = NamedCalendar {
                name,
                description: String::new(),
                definition: json_arg("--definition", &definition)?,
            };
            let (_, created): (_, NamedCalendar) =
                client.post("/api/v1/calendars", &calendar).await?;
            println!("{}", created.name);
        }
        CalendarCommand::Update { name, definition } => {
            let calendar = NamedCalendar {
                name: name.clone(),
                description: String::new(),
                definition: json_arg("--definition", &definition)?,
            };
            let updated: NamedCalendar = client
                .put(
                    &format!("/api/v1/calendars/{}", super::path_segment(&name)),
                    &calendar,
                )
                .await?;
            println!("{}", updated.name);
        }
        CalendarCommand::List { json } => {
            let calendars: Vec<NamedCalendar> = client.get("/api/v1/calendars").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&calendars)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = calendars
                .iter()
                .map(|c| {
                    vec![
                        c.name.clone(),
                        serde_json::to_string(&c.definition).unwrap_or_default(),
                    ]
                })
                .collect();
            table(&["CALENDAR", "DEFINITION"], &rows);
        }
        CalendarCommand::Delete { name } => {
            client
                .delete(&format!("/api/v1/calendars/{}", super::path_segment(&name)))
                .await?
        }
    }
    Ok(())
}

/// `chime services`: every instance that checks in, and the kinds with none alive.
pub async fn services(client: &ApiClient, json: bool) -> Result<()> {
    let rows: Vec<ServiceView> = client.get("/api/v1/services").await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.kind.clone(),
                r.instance_id.clone(),
                r.status.clone(),
                format!("{:.1}s ago", r.seconds_since_checkin),
            ]
        })
        .collect();
    table(&["KIND", "INSTANCE", "STATUS", "LAST CHECK-IN"], &cells);
    for kind in chime_core::store::services::KINDS {
        if !rows.iter().any(|r| r.kind == kind && r.status == "alive") {
            println!("no {kind} instance is alive: start `chime {kind}` (or `chime up`)");
        }
    }
    Ok(())
}

/// `chime job show`: readable by default, JSON with `--json`.
async fn show_job(client: &ApiClient, job: &Named, json: bool) -> Result<()> {
    let view: JobView = client.get(&job.path("jobs")).await?;
    let dependencies: chime_core::store::dependencies::JobDependencies = client
        .get(&format!("{}/dependencies", job.path("jobs")))
        .await?;
    if json {
        let mut shown = serde_json::to_value(&view)?;
        shown["dependencies"] = serde_json::to_value(&dependencies)?;
        println!("{}", serde_json::to_string_pretty(&shown)?);
        return Ok(());
    }
    let triggers: Vec<TriggerView> = client.get("/api/v1/triggers").await?;
    let full = format!("{}.{}", view.group, view.name);
    let field = |k: &str, v: String| println!("{k:<17} {v}");
    field("job", full);
    field("kind", view.kind.clone());
    field("spec", view.spec.to_string());
    field("worker group", view.worker_group.clone());
    if !view.description.is_empty() {
        field("description", view.description.clone());
    }
    field("priority", view.priority.to_string());
    field(
        "concurrent",
        if view.concurrent {
            "yes"
        } else {
            "no (one task at a time)"
        }
        .into(),
    );
    field(
        "retries",
        format!(
            "{} after failure, {} after rejection",
            view.failed_retries, view.reject_retries
        ),
    );
    field("timeout", opt(view.timeout_ms.map(|ms| format!("{ms} ms"))));
    field(
        "data-time period",
        view.data_time_period
            .as_deref()
            .map_or("-".into(), |p| format!("{p} ({})", view.data_time_zone)),
    );
    field("execute user", opt(view.execute_user.as_deref()));
    field(
        "retention",
        view.retention_days
            .map_or("the installation's".into(), |d| format!("{d} days")),
    );
    field(
        "success expected",
        view.expect_success_within_ms.map_or("-".into(), |ms| {
            format!(
                "within {:#} (else the webhooks are told)",
                jiff::SignedDuration::from_millis(ms)
            )
        }),
    );
    field(
        "source",
        view.source.as_deref().map_or("made by hand".into(), |s| {
            format!("{s} (chime apply: edits made by hand are overwritten by its next apply)")
        }),
    );
    field(
        "state",
        if view.paused { "paused" } else { "active" }.into(),
    );
    if let Some(run) = &view.last_run {
        field(
            "last run",
            format!(
                "{} {} (data time {})",
                run.task_id,
                run.status,
                time(run.data_time)
            ),
        );
    }
    let mine: Vec<&TriggerView> = triggers
        .iter()
        .filter(|t| t.job_group == view.group && t.job == view.name)
        .collect();
    if mine.is_empty() {
        println!("triggers:         none");
    } else {
        println!("triggers:");
        for t in mine {
            let zone = t.schedule.time_zone();
            let next = t
                .next_fire_time
                .map_or("-".into(), |at| crate::output::time_in(at, zone));
            println!(
                "  {}.{}  {}  {}  next {}",
                t.group,
                t.name,
                crate::output::describe_schedule(&t.schedule),
                t.state,
                next
            );
        }
    }
    for (label, list, other) in [
        ("depends on", &dependencies.upstreams, true),
        ("needed by", &dependencies.downstreams, false),
    ] {
        if list.is_empty() {
            continue;
        }
        println!("{label}:");
        for d in list {
            let name = if other { &d.upstream } else { &d.job };
            println!(
                "  {name}  (window {}, on upstream failure {})",
                serde_json::to_value(d.window)?.as_str().unwrap_or_default(),
                serde_json::to_value(d.on_upstream_failure)?
                    .as_str()
                    .unwrap_or_default()
            );
        }
    }
    let runs: Vec<chime_core::model::TaskSummary> = client
        .get_with(
            "/api/v1/tasks",
            &[
                ("job_group", view.group.clone()),
                ("job_name", view.name.clone()),
                ("limit", "10".into()),
            ],
        )
        .await?;
    if !runs.is_empty() {
        println!("recent runs:");
        let rows: Vec<Vec<String>> = runs
            .iter()
            .map(|r| {
                vec![
                    format!("  {}", r.id),
                    r.status.to_string(),
                    time(r.data_time),
                    time(r.finished_at),
                    opt(r.reason.as_deref()),
                ]
            })
            .collect();
        table(
            &["  ID", "STATUS", "DATA TIME", "FINISHED", "REASON"],
            &rows,
        );
    }
    Ok(())
}

/// `chime backfill JOB --from T --to T`, or `chime backfill list|show|cancel`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BackfillCli {
    #[command(subcommand)]
    command: Option<BackfillCommand>,
    /// The job to backfill.
    name: Option<String>,
    /// Its group.
    #[arg(long, default_value = "default")]
    group: String,
    /// The range's start (RFC 3339, inclusive).
    #[arg(long)]
    from: Option<jiff::Timestamp>,
    /// The range's end (RFC 3339, inclusive).
    #[arg(long)]
    to: Option<jiff::Timestamp>,
    /// Downstream jobs with triggers of their own also run for these data times.
    #[arg(long)]
    with_downstream: bool,
    /// How many run at once (default 1: serial).
    #[arg(long, default_value_t = 1)]
    parallelism: i32,
}

/// What to do with backfills.
#[derive(Debug, Subcommand)]
pub enum BackfillCommand {
    /// Lists backfills, newest first, with their progress.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shows one backfill's progress.
    Show {
        /// The backfill's id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancels a backfill: its tasks that have not ended are killed.
    Cancel {
        /// The backfill's id.
        id: i64,
    },
}

/// Runs `chime backfill …`.
pub async fn backfills(client: &ApiClient, cli: BackfillCli) -> Result<()> {
    use chime_core::store::backfills::BackfillProgress;
    let progress = |b: &BackfillProgress| {
        let total: i64 = b.tasks.values().sum();
        let counts: Vec<String> = b.tasks.iter().map(|(s, n)| format!("{n} {s}")).collect();
        (total, counts.join(", "))
    };
    let create = match (cli.name, cli.from, cli.to) {
        (Some(name), Some(from), Some(to)) => Some(BackfillArgs {
            job: Named {
                name,
                group: cli.group,
            },
            from,
            to,
            with_downstream: cli.with_downstream,
            parallelism: cli.parallelism,
        }),
        (None, None, None) => None,
        _ => {
            return Err(BadInput(
                "a backfill needs its job, --from and --to: chime backfill JOB --from T --to T"
                    .into(),
            )
            .into());
        }
    };
    match (cli.command, create) {
        (Some(BackfillCommand::List { json }), _) => {
            let list: Vec<BackfillProgress> = client.get("/api/v1/backfills").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|b| {
                    let (total, counts) = progress(b);
                    vec![
                        b.id.to_string(),
                        b.job.clone(),
                        format!("{} .. {}", b.from, b.to),
                        b.parallelism.to_string(),
                        total.to_string(),
                        if b.done {
                            "done".into()
                        } else {
                            "running".into()
                        },
                        counts,
                    ]
                })
                .collect();
            table(
                &[
                    "ID",
                    "JOB",
                    "RANGE",
                    "PARALLEL",
                    "TASKS",
                    "STATE",
                    "BY STATUS",
                ],
                &rows,
            );
        }
        (Some(BackfillCommand::Show { id, json }), _) => {
            let b: BackfillProgress = client.get(&format!("/api/v1/backfills/{id}")).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&b)?);
                return Ok(());
            }
            let (total, counts) = progress(&b);
            let field = |k: &str, v: String| println!("{k:<16} {v}");
            field("backfill", b.id.to_string());
            field("job", b.job.clone());
            field("range", format!("{} .. {}", b.from, b.to));
            field("parallelism", b.parallelism.to_string());
            field("with downstream", b.with_downstream.to_string());
            field("created", b.created_at.to_string());
            field("tasks", format!("{total} ({counts})"));
            field("state", if b.done { "done" } else { "running" }.into());
        }
        (Some(BackfillCommand::Cancel { id }), _) => {
            let (_, answer): (_, serde_json::Value) = client
                .post(&format!("/api/v1/backfills/{id}/cancel"), &json!({}))
                .await?;
            println!("backfill {id}: {} task(s) killed", answer["killed"]);
        }
        (None, Some(args)) => backfill(client, args).await?,
        (None, None) => {
            return Err(BadInput(
                "give a job and a range (chime backfill JOB --from T --to T) or list, show ID, \
                 cancel ID"
                    .into(),
            )
            .into());
        }
    }
    Ok(())
}

/// A backfill to make.
#[derive(Debug)]
struct BackfillArgs {
    job: Named,
    from: jiff::Timestamp,
    to: jiff::Timestamp,
    with_downstream: bool,
    parallelism: i32,
}

/// Backfills a job; prints the backfill's id and how many tasks it made.
async fn backfill(client: &ApiClient, args: BackfillArgs) -> Result<()> {
    if args.parallelism < 1 {
        return Err(BadInput("--parallelism must be at least 1".into()).into());
    }
    let (_, view): (_, serde_json::Value) = client
        .post(
            &format!("{}/backfill", args.job.path("jobs")),
            &json!({ "from": args.from, "to": args.to, "with_downstream": args.with_downstream,
                     "parallelism": args.parallelism }),
        )
        .await?;
    println!(
        "backfill {} of {}: {} tasks",
        view["id"],
        view["job"].as_str().unwrap_or_default(),
        view["tasks"]
    );
    Ok(())
}
