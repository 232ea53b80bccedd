//! `chime task list|show|kill|rerun`, and `chime prune`.

use anyhow::Result;
use chime_core::model::{TaskStatus, TaskSummary, TaskView};

use crate::client::ApiClient;
use crate::output::{opt, table, time};

/// Lists the newest tasks.
pub async fn list(
    client: &ApiClient,
    status: Option<TaskStatus>,
    limit: u32,
    json: bool,
) -> Result<()> {
    let mut path = format!("/api/v1/tasks?limit={limit}");
    if let Some(status) = status {
        path.push_str(&format!("&status={status}"));
    }
    let tasks: Vec<TaskSummary> = client.get(&path).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&tasks)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            vec![
                t.id.to_string(),
                t.status.to_string(),
                t.kind.clone(),
                t.group.clone(),
                t.attempt.to_string(),
                time(Some(t.created_at)),
                opt(t.reason.as_deref()),
            ]
        })
        .collect();
    table(
        &[
            "ID", "STATUS", "KIND", "GROUP", "ATTEMPT", "CREATED", "REASON",
        ],
        &rows,
    );
    Ok(())
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
    field("kind", task.kind.clone());
    field("group", task.group.clone());
    field("spec", task.spec.to_string());
    field("data time", time(task.data_time));
    field("created", time(Some(task.created_at)));
    field("started", time(task.started_at));
    field("finished", time(task.finished_at));
    field("next try", time(task.next_attempt_at));
    field("reason", opt(task.reason.as_deref()));
    if !task.waiting_on.is_empty() {
        println!("waiting on:");
        for unmet in &task.waiting_on {
            println!(
                "  {} {} {}",
                unmet.upstream,
                time(unmet.data_time),
                unmet.state
            );
        }
    }
    if let Some(result) = &task.result {
        field("exit code", opt(result.exit_code));
        field("error", opt(result.error.as_deref()));
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

/// Re-runs a task that has ended.
pub async fn rerun(client: &ApiClient, id: uuid::Uuid) -> Result<()> {
    let (_, task): (_, TaskView) = client
        .post(&format!("/api/v1/tasks/{id}/rerun"), &serde_json::json!({}))
        .await?;
    println!("{id} {} (attempt {})", task.status, task.attempt);
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
