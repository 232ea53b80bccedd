//! `chime validate`, `chime plan`, `chime apply`, `chime export` and `chime schema`: definitions
//! files checked with no server, what they would change in the store, that change made in one
//! transaction, the store's definitions written as a file, and the JSON Schema editors check
//! them with.

use std::path::{Path, PathBuf};

use anyhow::Result;
use chime_core::definitions::plan::{Action, Plan};
use chime_core::definitions::{self, Problem};
use chime_core::store::definitions::{ApplyRequest, Existing, Removal};
use chime_quartz_import::mapping::JobClassMappings;
use chime_quartz_import::xml::{self, XmlOptions};
use clap::Args;

use crate::client::ApiClient;
use crate::{BadInput, ExitWith};

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
    /// Definitions files, or directories searched for `*.yaml` and `*.yml`; a Quartz job file
    /// (`quartz_data.xml`) given by name.
    #[arg(short = 'f', long = "file", value_name = "PATH", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub quartz: QuartzArgs,
}

/// How Quartz job files (`*.xml`) are read: what each job class runs as, and the Quartz nodes'
/// zone, as `chime import quartz` takes them.
#[derive(Debug, Args, Default)]
pub struct QuartzArgs {
    /// For Quartz files: CLASS=shell:COMMAND (run by `sh -c`) or CLASS=http:URL (the job data
    /// POSTed to it); repeat for each class.
    #[arg(long = "job-class", value_name = "CLASS=TARGET")]
    pub job_classes: Vec<String>,
    /// For Quartz files: a file of CLASS=TARGET lines (`#` comments).
    #[arg(long = "job-classes", value_name = "FILE")]
    pub job_classes_file: Option<PathBuf>,
    /// For Quartz files: the Quartz nodes' `user.timezone` (an IANA zone), for triggers and
    /// times the file gives no zone.
    #[arg(long)]
    pub jvm_time_zone: Option<String>,
}

impl QuartzArgs {
    fn options(&self) -> Result<XmlOptions> {
        let mut mappings = JobClassMappings::default();
        if let Some(file) = &self.job_classes_file {
            let text = std::fs::read_to_string(file).map_err(|e| {
                BadInput(format!(
                    "--job-classes {}: cannot read it: {e}",
                    file.display()
                ))
            })?;
            mappings
                .add_file(&text, &file.display().to_string())
                .map_err(|e| BadInput(e.to_string()))?;
        }
        for mapping in &self.job_classes {
            mappings
                .add(mapping, "--job-class")
                .map_err(|e| BadInput(e.to_string()))?;
        }
        if let Some(zone) = &self.jvm_time_zone
            && chime_core::schedule::named_zone(zone).is_none()
        {
            return Err(BadInput(format!(
                "--jvm-time-zone {zone:?} is not a time zone (an IANA name such as \
                 Europe/Berlin, or an offset such as +05:30)"
            ))
            .into());
        }
        Ok(XmlOptions {
            mappings,
            jvm_zone: self.jvm_time_zone.clone(),
        })
    }
}

/// The files read and checked, with what Quartz files among them say beyond their jobs.
struct Read {
    loaded: definitions::Loaded,
    delete: Vec<Removal>,
    existing: Existing,
}

/// Reads and checks the files (YAML, and Quartz files given by name): every problem printed as
/// `file:line:column: …`, warnings too; an error if any is one.
fn read_checked(files: &[PathBuf], quartz: &QuartzArgs) -> Result<Read> {
    let (xml, yaml): (Vec<PathBuf>, Vec<PathBuf>) = files
        .iter()
        .cloned()
        .partition(|f| f.is_file() && xml::is_quartz_file(f));
    let mut problems = Vec::new();
    let mut loaded = if yaml.is_empty() {
        definitions::Loaded::default()
    } else {
        match definitions::read(&yaml) {
            Ok(loaded) => loaded,
            Err(found) => {
                problems.extend(found);
                definitions::Loaded::default()
            }
        }
    };
    let mut read = Read {
        loaded: definitions::Loaded::default(),
        delete: Vec::new(),
        existing: Existing::Update,
    };
    if !xml.is_empty() {
        let options = quartz.options()?;
        let mut directives: Option<(PathBuf, Existing)> = None;
        for file in &xml {
            match xml::read_file(file, &options) {
                Ok(quartz) => {
                    for warning in &quartz.warnings {
                        eprintln!("warning: {}: {warning}", file.display());
                    }
                    if let Some((first, existing)) = &directives
                        && *existing != quartz.existing
                    {
                        return Err(BadInput(format!(
                            "{} and {} have different processing-directives: apply them \
                             one at a time",
                            first.display(),
                            file.display()
                        ))
                        .into());
                    }
                    directives = Some((file.clone(), quartz.existing));
                    read.existing = quartz.existing;
                    read.delete.extend(quartz.delete);
                    loaded.documents.push(quartz.document);
                }
                Err(found) => problems.extend(found),
            }
        }
    }
    if !problems.is_empty() {
        return Err(too_many(problems).into());
    }
    let report = definitions::check(&loaded, jiff::Timestamp::now());
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    if !report.errors.is_empty() {
        return Err(too_many(report.errors).into());
    }
    read.loaded = loaded;
    Ok(read)
}

/// Checks the files as the API would, with no server, and says what they hold.
pub fn validate(args: ValidateArgs) -> Result<()> {
    let loaded = read_checked(&args.files, &args.quartz)?.loaded;
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

/// `chime apply -f PATH… [--dry-run] [--prune] [--source NAME] [--force] [--exit-code]`
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Definitions files, or directories searched for `*.yaml` and `*.yml`; a Quartz job file
    /// (`quartz_data.xml`) given by name.
    #[arg(short = 'f', long = "file", value_name = "PATH", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also delete the objects of this source that the files no longer hold (never objects
    /// made by hand or by another source).
    #[arg(long)]
    pub prune: bool,
    /// The name the objects are recorded with [default: the name of the first directory or
    /// file given].
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
    /// Prune a job even while it has live tasks, and the dependencies on it.
    #[arg(long)]
    pub force: bool,
    /// Exit 3 when there are changes (planned, or made), 0 when there are none: for CI.
    #[arg(long)]
    pub exit_code: bool,
    #[command(flatten)]
    pub quartz: QuartzArgs,
}

/// The exit status of `--exit-code` when there are changes (2 is a usage error already).
pub const CHANGES_EXIT_CODE: u8 = 3;

/// The source an apply records: `--source`, else the first path's own name (`chime` for
/// `-f chime/` or `-f ./chime`, `jobs.yaml` for a file).
fn source_of(args: &ApplyArgs) -> Result<String> {
    if let Some(source) = &args.source {
        return Ok(source.clone());
    }
    let first = args
        .files
        .first()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new("."));
    let absolute =
        std::path::absolute(first).map_err(|e| BadInput(format!("{}: {e}", first.display())))?;
    // `.` and `..` name the directory they stand for.
    let named = absolute
        .components()
        .fold(PathBuf::new(), |mut path, part| {
            match part {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir => {
                    path.pop();
                }
                other => path.push(other),
            }
            path
        });
    named
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            BadInput(format!(
                "{}: no name to record as the source; give --source NAME",
                first.display()
            ))
            .into()
        })
}

/// Checks the files with no server, then plans (and unless `--dry-run` applies, in one
/// transaction) what they say: prints each change; an error names the file and line of the
/// object it concerns.
pub async fn apply(client: &ApiClient, args: ApplyArgs) -> Result<()> {
    let Read {
        loaded,
        delete,
        existing,
    } = read_checked(&args.files, &args.quartz)?;
    let request = ApplyRequest {
        definitions: loaded.definitions(),
        source: Some(source_of(&args)?),
        prune: args.prune,
        force: args.force,
        delete,
        existing,
    };
    let path = if args.dry_run {
        "/api/v1/definitions/plan"
    } else {
        "/api/v1/definitions/apply"
    };
    let plan: Plan = match client.post(path, &request).await {
        Ok((_, plan)) => plan,
        Err(error) => {
            let message = error.to_string();
            return Err(match loaded.place(&message) {
                Some(problem) => BadInput(format!("{problem}; nothing was changed")).into(),
                None => error,
            });
        }
    };
    print!("{}", describe_plan(&plan));
    if !args.dry_run && !plan.is_empty() {
        println!("Applied.");
    }
    if args.exit_code && !plan.is_empty() {
        return Err(ExitWith(CHANGES_EXIT_CODE).into());
    }
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
