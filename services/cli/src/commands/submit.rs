//! `chime submit`: an ad-hoc task through the API; prints its id on the last line.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use chime_core::model::{Backoff, NewTask, TaskView};
use clap::Args;
use serde_json::json;

use crate::client::ApiClient;

/// `chime submit --kind shell --worker-group default -- echo hi`
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// Executor kind: shell, http, noop, or a kind configured on workers.
    #[arg(long, required_unless_present = "file")]
    kind: Option<String>,
    /// Submissions to send in batches, one JSON object a line as `POST /api/v1/tasks` takes it
    /// (`-`: standard input); prints one id a line, in order.
    #[arg(long, conflicts_with_all = [
        "kind", "group", "script", "spec", "data", "data_time", "timeout_ms", "priority",
        "execute_user", "reject_retries", "reject_interval_ms", "failed_retries",
        "failed_interval_ms", "backoff", "requests_recovery", "cwd", "name", "id", "wait", "json",
        "command",
    ])]
    file: Option<std::path::PathBuf>,
    /// Worker group (default: the kind's route, else `default`).
    #[arg(long = "worker-group", alias = "group")]
    group: Option<String>,
    /// A script for `sh -c` (shell kind), instead of an argv after `--`.
    #[arg(long, conflicts_with = "spec")]
    script: Option<String>,
    /// The executor's input as JSON, e.g. '{"sleep_ms": 100}' for noop; @FILE reads a file.
    #[arg(long)]
    spec: Option<String>,
    /// Data for the task, as JSON; @FILE reads a file.
    #[arg(long)]
    data: Option<String>,
    /// The data time it runs for (RFC 3339).
    #[arg(long)]
    data_time: Option<jiff::Timestamp>,
    /// Timeout of one attempt, in milliseconds.
    #[arg(long)]
    timeout_ms: Option<i64>,
    /// Priority (higher first; default 5).
    #[arg(long)]
    priority: Option<i32>,
    /// The OS user to run as.
    #[arg(long)]
    execute_user: Option<String>,
    /// Rejected attempts to retry (the reject budget; default 0).
    #[arg(long)]
    reject_retries: Option<i32>,
    /// Wait before retrying a rejected attempt, in milliseconds (default 3000).
    #[arg(long)]
    reject_interval_ms: Option<i64>,
    /// Failed attempts to retry (the failed budget; default 0).
    #[arg(long)]
    failed_retries: Option<i32>,
    /// Wait before retrying a failed attempt, in milliseconds (default 3000).
    #[arg(long)]
    failed_interval_ms: Option<i64>,
    /// How intervals grow: `fixed`, `exponential`, or JSON such as
    /// '{"kind":"exponential","factor":2,"max_interval_ms":60000,"jitter":0.1}'.
    #[arg(long)]
    backoff: Option<String>,
    /// Re-run the task if its worker dies mid-run (otherwise the attempt is lost and the failed
    /// budget decides).
    #[arg(long)]
    requests_recovery: bool,
    /// The directory the command runs in, on the worker (shell kind; default: the worker's
    /// own directory).
    #[arg(long)]
    cwd: Option<String>,
    /// A label for the task: lists show it, and `task list --text` finds it.
    #[arg(long)]
    name: Option<String>,
    /// A client-chosen task id: submitting it again makes no second task.
    #[arg(long)]
    id: Option<uuid::Uuid>,
    /// Wait until the task ends, print its output, and exit with its exit code (137 if killed, 1
    /// for a failure without one).
    #[arg(long)]
    wait: bool,
    /// Print the created task as JSON before its id.
    #[arg(long)]
    json: bool,
    /// The command to run (shell kind), after `--`.
    #[arg(last = true)]
    command: Vec<String>,
}

/// Submits the task (or, with `--file`, every line's); with `--wait`, waits for its end.
pub async fn run(client: &ApiClient, args: SubmitArgs) -> Result<()> {
    if let Some(file) = &args.file {
        return submit_file(client, file).await;
    }
    let task = new_task(&args)?;
    let (_, view): (_, TaskView) = client.post("/api/v1/tasks", &task).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    }
    if args.wait {
        // The id first, so a user who stops waiting can still follow the task.
        println!("{}", view.id);
        warn_if_unserved(client, &view.group).await;
        let done = wait_for_end(client, view.id).await?;
        let result = done.result.clone().unwrap_or_default();
        print!("{}", result.output);
        if !result.output.is_empty() && !result.output.ends_with('\n') {
            println!();
        }
        return match exit_code(&done) {
            0 => {
                eprintln!("task {} succeeded", view.id);
                Ok(())
            }
            code => Err(crate::TaskEnded {
                code,
                message: format!(
                    "task {} {}{}",
                    view.id,
                    done.status,
                    match (done.reason.as_deref(), result.error.as_deref()) {
                        (_, Some(error)) => format!(": {error}"),
                        (Some(reason), None) => format!(" ({reason})"),
                        (None, None) => String::new(),
                    }
                ),
            }
            .into()),
        };
    }
    println!("{}", view.id);
    Ok(())
}

/// What `submit --wait` exits with (docs/src/getting-started/first-job.md): 0 for a success; a
/// failed task's own exit code (1–255); 1 for a failure without one (a timeout, a lost worker,
/// an upstream's failure, a command that could not start); 137 for a kill, as a shell reports a
/// command killed by SIGKILL.
fn exit_code(task: &TaskView) -> u8 {
    use chime_core::model::TaskStatus;
    match task.status {
        TaskStatus::Succeeded => 0,
        TaskStatus::Killed => 137,
        _ => task
            .result
            .as_ref()
            .and_then(|r| r.exit_code)
            .and_then(|c| u8::try_from(c).ok())
            .filter(|c| *c != 0)
            .unwrap_or(1),
    }
}

/// How many submissions one `POST /api/v1/tasks/batch` carries (the API's most).
const FILE_BATCH: usize = 1000;

/// How many bytes of submissions one batch carries, at most: below the API's 16 MiB body limit.
const FILE_BATCH_BYTES: usize = 12 * 1024 * 1024;

/// `submit --file`: every line a submission, sent in batches; each batch is written whole or
/// not at all, so an error names its line and says how many went in before it.
async fn submit_file(client: &ApiClient, file: &std::path::Path) -> Result<()> {
    use std::io::BufRead;
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let opened = std::fs::File::open(file)
            .with_context(|| format!("--file: cannot read {}", file.display()))?;
        Box::new(std::io::BufReader::new(opened))
    };
    let submit_user = std::env::var("USER").ok();
    let mut batch: Vec<NewTask> = Vec::with_capacity(FILE_BATCH);
    let mut lines: Vec<usize> = Vec::with_capacity(FILE_BATCH);
    let mut sent = 0;
    let mut bytes = 0;
    for (index, line) in reader.lines().enumerate() {
        let number = index + 1;
        let line = line.with_context(|| format!("--file: reading line {number}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let mut task: NewTask = serde_json::from_str(&line)
            .map_err(|e| anyhow::anyhow!("line {number}: {e}{}", recorded_before(sent)))?;
        if task.submit_user.is_none() {
            task.submit_user.clone_from(&submit_user);
        }
        task.validate()
            .map_err(|e| anyhow::anyhow!("line {number}: {e}{}", recorded_before(sent)))?;
        if bytes + line.len() > FILE_BATCH_BYTES && !batch.is_empty() {
            sent += send_batch(client, &mut batch, &mut lines, sent).await?;
            bytes = 0;
        }
        bytes += line.len();
        batch.push(task);
        lines.push(number);
        if batch.len() == FILE_BATCH {
            sent += send_batch(client, &mut batch, &mut lines, sent).await?;
            bytes = 0;
        }
    }
    if !batch.is_empty() {
        send_batch(client, &mut batch, &mut lines, sent).await?;
    }
    Ok(())
}

/// Sends one batch, prints its ids, and empties it; an error names the line of the submission
/// the API refused.
async fn send_batch(
    client: &ApiClient,
    batch: &mut Vec<NewTask>,
    lines: &mut Vec<usize>,
    sent: usize,
) -> Result<usize> {
    #[derive(serde::Deserialize)]
    struct Answer {
        tasks: Vec<Submitted>,
    }
    #[derive(serde::Deserialize)]
    struct Submitted {
        id: uuid::Uuid,
    }
    let body = json!({ "tasks": &*batch });
    let answer: Result<(_, Answer)> = client.post("/api/v1/tasks/batch", &body).await;
    let (_, answer) = answer.map_err(|error| {
        let message = error.to_string();
        // "tasks[3]: …" from the API is the batch's fourth submission: its line.
        let line = message
            .strip_prefix("tasks[")
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(index, rest)| Some((lines.get(index.parse::<usize>().ok()?)?, rest)));
        match line {
            Some((line, rest)) => anyhow::anyhow!(
                "line {line}: {}{}",
                rest.trim_start_matches(':').trim_start(),
                recorded_before(sent)
            ),
            // Not the API's answer (the API unreachable, the answer lost): the batch may or
            // may not have gone in.
            None if !message.contains("(HTTP ") => anyhow::anyhow!(
                "{message} (lines {}–{} may or may not have been recorded; {sent} before them were)",
                lines.first().copied().unwrap_or_default(),
                lines.last().copied().unwrap_or_default()
            ),
            None => anyhow::anyhow!("{message}{}", recorded_before(sent)),
        }
    })?;
    for task in &answer.tasks {
        println!("{}", task.id);
    }
    let n = batch.len();
    batch.clear();
    lines.clear();
    Ok(n)
}

/// Says, after an error, how many submissions were recorded before it.
fn recorded_before(sent: usize) -> String {
    match sent {
        0 => " (nothing was submitted)".to_string(),
        n => format!(" ({n} submissions before it were recorded; their ids are printed above)"),
    }
}

fn new_task(args: &SubmitArgs) -> Result<NewTask> {
    let kind = args.kind.clone().unwrap_or_default();
    let spec = match (&args.spec, &args.script, args.command.is_empty()) {
        (Some(spec), _, true) => json_arg("--spec", spec)?,
        (Some(_), _, false) => bail!("give the command either after -- or in --spec, not both"),
        (None, Some(script), true) => json!({ "command": script }),
        (None, Some(_), false) => {
            bail!("give the command either after -- or with --script, not both")
        }
        (None, None, false) if kind == "shell" => json!({ "command": args.command }),
        (None, None, false) => bail!(
            "only the shell kind takes a command after --; give a {} task's input with --spec JSON",
            kind
        ),
        (None, None, true) if kind == "shell" => bail!(
            "a shell task needs a command: chime submit --kind shell -- CMD [ARGS…], or --script 'CMD'"
        ),
        (None, None, true) => json!({}),
    };
    let mut spec = spec;
    if let Some(cwd) = &args.cwd {
        match (kind.as_str(), spec.as_object_mut()) {
            ("shell", Some(fields)) => {
                fields.insert("cwd".into(), json!(cwd));
            }
            _ => bail!("--cwd is for shell tasks (their command runs there)"),
        }
    }
    let data = match &args.data {
        Some(data) => json_arg("--data", data)?,
        None => json!({}),
    };
    let task = NewTask {
        id: args.id,
        kind,
        group: args.group.clone(),
        spec,
        data,
        data_time: args.data_time,
        priority: args.priority,
        timeout_ms: args.timeout_ms,
        execute_user: args.execute_user.clone(),
        submit_user: std::env::var("USER").ok(),
        reject_retries: args.reject_retries,
        reject_interval_ms: args.reject_interval_ms,
        failed_retries: args.failed_retries,
        failed_interval_ms: args.failed_interval_ms,
        backoff: args.backoff.as_deref().map(backoff_arg).transpose()?,
        requests_recovery: args.requests_recovery.then_some(true),
        name: args.name.clone(),
    };
    // The API checks the same; checking here fails fast and sends nothing.
    task.validate()?;
    Ok(task)
}

/// `--backoff`: a kind name, or the whole JSON form.
pub(crate) fn backoff_arg(value: &str) -> Result<Backoff> {
    let json = match value {
        "fixed" | "exponential" => json!({ "kind": value }),
        _ => json_arg("--backoff", value)?,
    };
    serde_json::from_value(json).context(
        "--backoff: expected fixed, exponential, or JSON such as \
         {\"kind\":\"exponential\",\"factor\":2,\"max_interval_ms\":60000,\"jitter\":0.1}",
    )
}

/// A JSON argument, given inline or as `@FILE`.
pub(crate) fn json_arg(flag: &str, value: &str) -> Result<serde_json::Value> {
    match value.strip_prefix('@') {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("{flag}: cannot read {path}"))?;
            serde_json::from_str(&text).with_context(|| format!("{flag}: {path} is not valid JSON"))
        }
        None => serde_json::from_str(value).with_context(|| format!("{flag} is not valid JSON")),
    }
}

/// Says so on stderr when no online worker consumes `group`: the task waits until one does.
async fn warn_if_unserved(client: &ApiClient, group: &str) {
    let path = format!("/api/v1/worker-groups/{}", super::path_segment(group));
    if let Ok(view) = client
        .get::<chime_core::store::worker_groups::WorkerGroupView>(&path)
        .await
        && view.workers_online == 0
    {
        eprintln!(
            "warning: no online worker consumes worker group {group:?}; the task waits until one \
             does (chime worker --groups {group})"
        );
    }
}

async fn wait_for_end(client: &ApiClient, id: uuid::Uuid) -> Result<TaskView> {
    let mut delay = Duration::from_millis(50);
    loop {
        let task: TaskView = client.get(&format!("/api/v1/tasks/{id}")).await?;
        if task.status.is_terminal() {
            return Ok(task);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}
