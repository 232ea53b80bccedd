//! `chime validate`, `chime export` and `chime schema`: definitions files checked with no
//! server, the store's definitions written as a file, and the JSON Schema editors check them
//! with.

use std::path::PathBuf;

use anyhow::Result;
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

/// Checks the files as `apply` would, with no server: prints every problem as
/// `file:line:column: …`, warnings too, and fails if any is an error.
pub fn validate(args: ValidateArgs) -> Result<()> {
    let loaded = definitions::read(&args.files).map_err(too_many)?;
    let report = definitions::check(&loaded, jiff::Timestamp::now());
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    if !report.errors.is_empty() {
        return Err(too_many(report.errors).into());
    }
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
