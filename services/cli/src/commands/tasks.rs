//! `chime task list|show|kill|rerun`, and `chime prune`.

use anyhow::{Context, Result};
use chime_core::model::{TaskStatus, TaskSummary, TaskView};

use crate::client::ApiClient;
use crate::output::{opt, table, time};

/// `chime task list`'s filters.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only tasks in this status.
    #[arg(long)]
    pub status: Option<TaskStatus>,
    /// Only tasks of this job (`group.name`, or `name` in the default group).
    #[arg(long)]
    pub job: Option<String>,
    /// The job's group, when its group has a dot in it (`--job` is then the name alone).
    #[arg(long, requires = "job")]
    pub job_group: Option<String>,
    /// Only tasks for this worker group.
    #[arg(long)]
    pub worker_group: Option<String>,
    /// Only tasks of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only tasks created since: an age (30m, 12h, 7d) or an RFC 3339 time.
    #[arg(long)]
    pub since: Option<String>,
    /// Only tasks whose data time is at or after this (RFC 3339).
    #[arg(long)]
    pub data_time_from: Option<jiff::Timestamp>,
    /// Only tasks whose data time is before this (RFC 3339).
    #[arg(long)]
    pub data_time_to: Option<jiff::Timestamp>,
    /// Only tasks whose id starts with, or whose job name, name, command, kind, reason or
    /// submitter contains, this text.
    #[arg(long)]
    pub text: Option<String>,
    /// The next page: tasks older than this task id (the last of the previous page).
    #[arg(long)]
    pub before: Option<uuid::Uuid>,
    /// At most this many (at most 1000).
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Lists the newest tasks that pass the filters.
pub async fn list(client: &ApiClient, args: ListArgs) -> Result<()> {
    let mut query = vec![("limit", args.limit.to_string())];
    if let Some(status) = args.status {
        query.push(("status", status.to_string()));
    }
    if let Some(group) = args.job_group {
        query.push(("job_group", group));
        query.push(("job_name", args.job.unwrap_or_default()));
    } else if let Some(job) = args.job {
        query.push(("job", job));
    }
    if let Some(group) = args.worker_group {
        query.push(("worker_group", group));
    }
    if let Some(kind) = args.kind {
        query.push(("kind", kind));
    }
    if let Some(since) = args.since {
        query.push(("since", since_time(&since)?));
    }
    if let Some(from) = args.data_time_from {
        query.push(("data_time_from", from.to_string()));
    }
    if let Some(to) = args.data_time_to {
        query.push(("data_time_to", to.to_string()));
    }
    if let Some(text) = args.text {
        query.push(("q", text));
    }
    if let Some(before) = args.before {
        query.push(("before", before.to_string()));
    }
    let tasks: Vec<TaskSummary> = client.get_with("/api/v1/tasks", &query).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&tasks)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            vec![
                t.id.to_string(),
                t.status.to_string(),
                match (&t.job, &t.name, &t.command) {
                    (Some(j), _, _) => format!("{}.{}", j.group, j.name),
                    (None, Some(name), _) => format!("\"{name}\""),
                    // What an unnamed ad-hoc task runs, so a list tells them apart.
                    (None, None, Some(command)) => format!("$ {command}"),
                    (None, None, None) => "-".into(),
                },
                t.kind.clone(),
                t.group.clone(),
                t.attempt.to_string(),
                time(t.data_time),
                time(Some(t.created_at)),
                opt(t.reason.as_deref()),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "STATUS",
            "JOB / NAME",
            "KIND",
            "GROUP",
            "ATTEMPT",
            "DATA TIME",
            "CREATED",
            "REASON",
        ],
        &rows,
    );
    Ok(())
}

/// `--since`: an age before now, or a time as given.
fn since_time(since: &str) -> Result<String> {
    if let Ok(at) = since.parse::<jiff::Timestamp>() {
        return Ok(at.to_string());
    }
    let seconds = parse_age(since).map_err(|e| {
        crate::BadInput(format!(
            "--since {e}; or give an RFC 3339 time such as 2026-01-02T03:04:05Z"
        ))
    })?;
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
    let at = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(jiff::Timestamp::MIN);
    Ok(at.to_string())
}

/// Prints an attempt's output; with `follow`, keeps printing what a running task adds until it
/// ends (following the next attempt when the task is retried).
pub async fn logs(
    client: &ApiClient,
    id: uuid::Uuid,
    attempt: Option<i32>,
    follow: bool,
) -> Result<()> {
    use std::io::Write;
    let path = format!("/api/v1/tasks/{id}/logs");
    let mut query = Vec::new();
    if let Some(attempt) = attempt {
        query.push(("attempt", attempt.to_string()));
    }
    if !follow {
        let mut response = client.get_streaming(&path, &query).await?;
        let mut stdout = std::io::stdout().lock();
        while let Some(chunk) = response.chunk().await.context("reading the output")? {
            stdout.write_all(&chunk)?;
        }
        return Ok(());
    }
    query.push(("follow", "true".into()));
    let mut response = client.get_streaming(&path, &query).await?;
    let mut events = SseParser::default();
    while let Some(chunk) = response.chunk().await.context("reading the output")? {
        for (event, data) in events.push(&chunk) {
            let data: serde_json::Value = serde_json::from_str(&data).unwrap_or_default();
            match event.as_str() {
                "output" => {
                    let text = data.get("text").and_then(|t| t.as_str()).unwrap_or("");
                    let mut stdout = std::io::stdout().lock();
                    stdout.write_all(text.as_bytes())?;
                    stdout.flush()?;
                }
                "attempt" => {
                    let n = data.get("attempt").and_then(|a| a.as_i64()).unwrap_or(0);
                    if n > 1 {
                        eprintln!("--- attempt {n} ---");
                    }
                }
                "end" => {
                    let status = data.get("status").and_then(|s| s.as_str()).unwrap_or("");
                    eprintln!("--- task {id} {status} ---");
                    return Ok(());
                }
                _ => {}
            }
        }
    }
    anyhow::bail!("the API closed the stream before the task ended (restarted?): run it again")
}

/// Splits a server-sent event stream into (event, data) pairs as its bytes arrive (a character
/// split between two chunks is decoded once whole).
#[derive(Debug, Default)]
struct SseParser {
    pending: Vec<u8>,
}

impl SseParser {
    fn push(&mut self, bytes: &[u8]) -> Vec<(String, String)> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.pending.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&block);
            let mut event = String::from("message");
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    event = value.trim().to_string();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
                }
            }
            if !data.is_empty() {
                events.push((event, data.join("\n")));
            }
        }
        events
    }
}

/// A task as a person names it: its whole id, or the start of it (at least 8 hex digits,
/// hyphens optional) that no other task's id has.
pub async fn resolve(client: &ApiClient, text: &str) -> Result<uuid::Uuid> {
    if let Ok(id) = text.parse::<uuid::Uuid>() {
        return Ok(id);
    }
    text.parse::<chime_core::store::tasks::IdPrefix>()
        .map_err(crate::BadInput)?;
    // Validated above: hex digits and hyphens only, nothing to escape.
    let found: Vec<TaskSummary> = client
        .get(&format!("/api/v1/tasks?id_prefix={text}&limit=4"))
        .await?;
    match found.as_slice() {
        [] => Err(crate::BadInput(format!("no task's id starts with {text}")).into()),
        [one] => Ok(one.id),
        several => Err(crate::BadInput(format!(
            "{text} starts the ids of {} tasks ({}): give more of it",
            if several.len() > 3 {
                "several".to_string()
            } else {
                several.len().to_string()
            },
            several
                .iter()
                .take(3)
                .map(|t| t.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

/// Shows one task with its attempts.
pub async fn show(client: &ApiClient, id: uuid::Uuid, json: bool) -> Result<()> {
    let task: TaskView = client.get(&format!("/api/v1/tasks/{id}")).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&task)?);
        return Ok(());
    }
    let job = task
        .job
        .as_ref()
        .map(|j| format!("{}.{} ({})", j.group, j.name, j.id));
    let field = |name: &str, value: String| println!("{name:<11} {value}");
    field("id", task.id.to_string());
    field("status", task.status.to_string());
    field("attempt", task.attempt.to_string());
    field("job", opt(job));
    if let Some(name) = &task.name {
        field("name", name.clone());
    }
    field("kind", task.kind.clone());
    field("group", task.group.clone());
    field("spec", task.spec.to_string());
    field("data time", time(task.data_time));
    field("created", time(Some(task.created_at)));
    field("started", time(task.started_at));
    field("finished", time(task.finished_at));
    field("next try", time(task.next_attempt_at));
    field("reason", opt(task.reason.as_deref()));
    for why in &task.stalled {
        println!("not running: {why}");
    }
    if !task.waiting_on.is_empty() {
        println!("waiting on:");
        for unmet in &task.waiting_on {
            let task = unmet
                .task
                .map(|id| format!(" (task {id})"))
                .unwrap_or_default();
            println!(
                "  {} {} {}{task}",
                unmet.upstream,
                time(unmet.data_time),
                unmet.state
            );
        }
    }
    if let Some(result) = &task.result {
        field("exit code", opt(result.exit_code));
        field("error", opt(result.error.as_deref()));
        if let Some(value) = &result.value {
            field("result", value.to_string());
        }
        if !result.output.is_empty() {
            println!("output:");
            for line in result.output.lines() {
                println!("  {line}");
            }
        }
    }
    if !task.attempts.is_empty() {
        println!("attempts:");
        let rows: Vec<Vec<String>> = task
            .attempts
            .iter()
            .map(|a| {
                vec![
                    a.attempt.to_string(),
                    a.outcome
                        .map_or("running".into(), |o| o.as_str().to_string()),
                    opt(a.worker.as_deref()),
                    time(Some(a.started_at)),
                    time(a.finished_at),
                    opt(a.error.as_deref()),
                ]
            })
            .collect();
        table(
            &["  #", "OUTCOME", "WORKER", "STARTED", "FINISHED", "ERROR"],
            &rows
                .into_iter()
                .map(|mut r| {
                    r[0] = format!("  {}", r[0]);
                    r
                })
                .collect::<Vec<_>>(),
        );
    }
    Ok(())
}

/// Kills a task and reports its status; a running task is waited for (up to 10 s) until its
/// worker has recorded the kill.
pub async fn kill(client: &ApiClient, id: uuid::Uuid) -> Result<()> {
    let (_, mut task): (_, TaskView) = client
        .post(&format!("/api/v1/tasks/{id}/kill"), &serde_json::json!({}))
        .await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !task.status.is_terminal() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        task = client.get(&format!("/api/v1/tasks/{id}")).await?;
    }
    if task.status.is_terminal() {
        println!("{id} {}", task.status);
    } else {
        println!("{id} {}: kill sent to its worker", task.status);
    }
    Ok(())
}

/// Many tasks of one job, for `chime task rerun|kill --job …`.
#[derive(Debug, clap::Args)]
pub struct BulkArgs {
    /// Every task of this job (`group.name`, or `name` in the default group) that the other
    /// options pick, in one transaction; prints how many.
    #[arg(long)]
    pub job: Option<String>,
    /// The job's group, when its group has a dot in it (`--job` is then the name alone).
    #[arg(long, requires = "job")]
    pub job_group: Option<String>,
    /// Only tasks in this status (repeatable; default: every ended one for rerun, every one not
    /// ended for kill).
    #[arg(long, requires = "job")]
    pub status: Vec<String>,
    /// Only data times at or after this (RFC 3339).
    #[arg(long, requires = "job")]
    pub data_time_from: Option<jiff::Timestamp>,
    /// Only data times at or before this (RFC 3339).
    #[arg(long, requires = "job")]
    pub data_time_to: Option<jiff::Timestamp>,
    /// Change nothing; print what would be done.
    #[arg(long, requires = "job")]
    pub dry_run: bool,
}

/// The job a `group.name` value names: groups and names may hold dots, so each split is asked
/// for and the one that exists is taken; when none does, the first dot's split (whose error then
/// says the job was not found); when several do, an error asking for `--job-group`.
async fn dotted_job(client: &ApiClient, text: &str) -> Result<(String, String)> {
    let Some(first) = text.split_once('.') else {
        return Ok(("default".to_string(), text.to_string()));
    };
    let mut splits = vec![("default", text)];
    splits.extend(
        text.match_indices('.')
            .map(|(dot, _)| (&text[..dot], &text[dot + 1..])),
    );
    let mut found = Vec::new();
    for (group, name) in splits {
        let path = format!(
            "/api/v1/jobs/{}/{}",
            super::path_segment(group),
            super::path_segment(name)
        );
        if client.exists(&path).await? {
            found.push((group.to_string(), name.to_string()));
        }
    }
    match found.len() {
        0 => Ok((first.0.to_string(), first.1.to_string())),
        1 => Ok(found.remove(0)),
        _ => anyhow::bail!(
            "--job {text:?} names {} jobs ({}): give the group apart with --job-group",
            found.len(),
            found
                .iter()
                .map(|(g, n)| format!("group {g:?} name {n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `chime task rerun|kill --job J …`: one call, one transaction; prints the count and the ids.
pub async fn bulk(
    client: &ApiClient,
    action: &str,
    args: BulkArgs,
    downstream: bool,
) -> Result<()> {
    let job = args.job.unwrap_or_default();
    let (group, name) = match &args.job_group {
        Some(group) => (group.clone(), job.clone()),
        None => dotted_job(client, &job).await?,
    };
    let (group, name) = (group.as_str(), name.as_str());
    let body = serde_json::json!({
        "status": (!args.status.is_empty()).then_some(&args.status),
        "data_time_from": args.data_time_from,
        "data_time_to": args.data_time_to,
        "downstream": downstream,
        "dry_run": args.dry_run,
    });
    let (_, done): (_, chime_core::store::task_lifecycle::BulkOutcome) = client
        .post(
            &format!(
                "/api/v1/jobs/{}/{}/tasks/{action}",
                super::path_segment(group),
                super::path_segment(name)
            ),
            &body,
        )
        .await?;
    let verb = match (action, args.dry_run) {
        ("kill", false) => "killed (a running one: its kill sent)",
        ("kill", true) => "would be killed",
        (_, false) => "re-run",
        (_, true) => "would be re-run",
    };
    println!("{} task(s) of {group}.{name} {verb}", done.tasks.len());
    if !done.downstream_waiting.is_empty() {
        let wait = if args.dry_run {
            "would wait"
        } else {
            "waiting"
        };
        println!(
            "{} downstream task(s) {wait} again",
            done.downstream_waiting.len()
        );
    }
    for id in &done.tasks {
        println!("{id}");
    }
    Ok(())
}

/// Re-runs a task that has ended; its `upstream_failed` descendants (with `downstream`, every
/// ended one) wait again.
pub async fn rerun(client: &ApiClient, id: uuid::Uuid, downstream: bool) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Rerun {
        #[serde(flatten)]
        task: TaskView,
        #[serde(default)]
        downstream_waiting: Vec<uuid::Uuid>,
    }
    let (_, rerun): (_, Rerun) = client
        .post(
            &format!("/api/v1/tasks/{id}/rerun?downstream={downstream}"),
            &serde_json::json!({}),
        )
        .await?;
    println!(
        "{id} {} (attempt {})",
        rerun.task.status, rerun.task.attempt
    );
    if !rerun.downstream_waiting.is_empty() {
        println!(
            "{} downstream task(s) waiting again: {}",
            rerun.downstream_waiting.len(),
            rerun
                .downstream_waiting
                .iter()
                .map(|id| id.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    Ok(())
}

/// `7d`, `12h`, `30m`, `90s` or `2w` as seconds.
pub fn parse_age(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: give a unit, as in 7d, 12h, 30m or 90s"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit, as in 7d"))?;
    let unit_s = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(format!("{text:?}: the unit is s, m, h, d or w")),
    };
    n.checked_mul(unit_s)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// Prunes history older than `older_than_s` seconds (or counts it, with `dry_run`).
pub async fn prune(client: &ApiClient, older_than_s: u64, dry_run: bool) -> Result<()> {
    let (_, report): (_, chime_core::store::retention::PruneReport) = client
        .post(
            "/api/v1/prune",
            &serde_json::json!({ "older_than_s": older_than_s, "dry_run": dry_run }),
        )
        .await?;
    for kept in &report.kept {
        println!(
            "keeps {} ended task(s) of {}: waiting task {} ({}{}) needs them",
            kept.tasks,
            kept.upstream,
            kept.task,
            kept.job,
            kept.data_time
                .map(|t| format!(", data time {t}"))
                .unwrap_or_default()
        );
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    println!(
        "{verb} {} ended task(s) and {} fired-trigger row(s){}",
        report.tasks,
        report.fired_triggers,
        if report.busy {
            " (another instance was pruning; run again to finish)"
        } else {
            ""
        }
    );
    Ok(())
}
