//! `chime validate`, `chime plan`, `chime export` and `chime schema`: definitions files checked
//! with no server, what they would change in the store, the store's definitions written as a
//! file, and the JSON Schema editors check them with.

use std::path::PathBuf;

use anyhow::Result;
use chime_core::definitions::plan::{Action, Plan};
use chime_core::definitions::{self, Problem};
use clap::Args;

use crate::BadInput;
use crate::client::ApiClient;

/// `chime export [--job-group G]… [-o FILE]`
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Only the jobs of this group (repeatable), with the calendars their triggers name.
    #[arg(long = "job-group", value_name = "GROUP")]
    pub job_groups: Vec<String>,
    /// Write to this file instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Writes the store's definitions as YAML: the same store, the same bytes.
pub async fn export(client: &ApiClient, args: ExportArgs) -> Result<()> {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for group in &args.job_groups {
        query.append_pair("job_group", group);
    }
    let query = query.finish();
    let path = if query.is_empty() {
        "/api/v1/definitions".to_string()
    } else {
        format!("/api/v1/definitions?{query}")
    };
    let definitions: definitions::Definitions = client.get(&path).await?;
    let yaml = serde_saphyr::to_string(&definitions)
        .map_err(|e| anyhow::anyhow!("writing the definitions as YAML: {e}"))?;
    let text = format!(
        "# chime definitions: {} jobs. `chime validate -f FILE` checks this file.\n{yaml}",
        definitions.jobs.len()
    );
    match &args.output {
        Some(file) => std::fs::write(file, text)
            .map_err(|e| BadInput(format!("{}: cannot write it: {e}", file.display())))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// `chime validate -f PATH…`
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Definitions files, or directories searched for `*.yaml` and `*.yml`.
    #[arg(short = 'f', long = "file", value_name = "PATH", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
}

/// Reads and checks the files: every problem printed as `file:line:column: …`, warnings too;
/// an error if any is one.
fn read_checked(files: &[PathBuf]) -> Result<definitions::Loaded> {
    let loaded = definitions::read(files).map_err(too_many)?;
    let report = definitions::check(&loaded, jiff::Timestamp::now());
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    if !report.errors.is_empty() {
        return Err(too_many(report.errors).into());
    }
    Ok(loaded)
}

/// Checks the files as the API would, with no server, and says what they hold.
pub fn validate(args: ValidateArgs) -> Result<()> {
    let loaded = read_checked(&args.files)?;
    let all = loaded.definitions();
    let triggers: usize = all.jobs.iter().map(|j| j.triggers.len()).sum();
    let dependencies: usize = all.jobs.iter().map(|j| j.depends_on.len()).sum();
    println!(
        "ok: {} documents: {} worker groups, {} routes, {} calendars, {} jobs, {triggers} \
         triggers, {dependencies} dependencies",
        loaded.documents.len(),
        all.worker_groups.len(),
        all.routes.len(),
        all.calendars.len(),
        all.jobs.len(),
    );
    Ok(())
}

/// Checks the files, then prints what applying them would change in the store: `+` made, `~`
/// changed (each setting, before → after), `-` removed. Changes nothing.
pub async fn plan(client: &ApiClient, args: ValidateArgs) -> Result<()> {
    let loaded = read_checked(&args.files)?;
    let (_, plan): (_, Plan) = client
        .post("/api/v1/definitions/plan", &loaded.definitions())
        .await?;
    print!("{}", describe_plan(&plan));
    Ok(())
}

/// The plan as `chime plan` prints it.
pub fn describe_plan(plan: &Plan) -> String {
    if plan.is_empty() {
        return "No changes: the store already holds what the files say.\n".into();
    }
    let mut text = String::new();
    let (mut made, mut changed, mut removed) = (0, 0, 0);
    for change in &plan.changes {
        let sign = match change.action {
            Action::Create => {
                made += 1;
                '+'
            }
            Action::Update => {
                changed += 1;
                '~'
            }
            Action::Delete => {
                removed += 1;
                '-'
            }
        };
        text.push_str(&format!("{sign} {}\n", change.object));
        if change.action == Action::Update {
            for field in &change.fields {
                text.push_str(&format!(
                    "    {}: {} → {}\n",
                    field.field, field.before, field.after
                ));
            }
        }
    }
    text.push_str(&format!(
        "Plan: {made} to make, {changed} to change, {removed} to remove.\n"
    ));
    text
}

/// Every problem but the last printed as `error: …`; the last becomes the error the command
/// exits with (printed the same way), so each is on a line of its own.
fn too_many(mut problems: Vec<Problem>) -> BadInput {
    let last = problems.pop();
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    BadInput(match last {
        Some(problem) => problem.to_string(),
        None => "the definitions are not valid".into(),
    })
}

/// Prints the JSON Schema of the definitions format.
pub fn schema() -> Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(&definitions::schema::json_schema())?
    );
    Ok(())
}
