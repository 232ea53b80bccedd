//! `chime validate` and `chime schema`: definitions files checked with no server, and the JSON
//! Schema editors check them with.

use std::path::PathBuf;

use anyhow::Result;
use chime_core::definitions::{self, Problem};
use clap::Args;

use crate::BadInput;

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
