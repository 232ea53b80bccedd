//! `chime import quartz`: moves a stopped Quartz cluster's store into chime's (the work is in
//! the `chime-quartz-import` crate; this is its command line and its report's text form).

use anyhow::{Context, Result};
use chime_core::config::Settings;
use chime_core::store::Store;
use chime_quartz_import::import::{ImportError, ImportOptions, import};
use chime_quartz_import::mapping::JobClassMappings;
use chime_quartz_import::plan::{PlanOptions, Report};
use chime_quartz_import::source::SourceOptions;
use clap::{Args, Subcommand};
use jiff::{SignedDuration, Timestamp};

/// `chime import …`
#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Reads a stopped Quartz 2.x JDBC job store (QRTZ_* tables) and writes its jobs, triggers,
    /// calendars and pauses into chime's store (CHIME_DATABASE_URL), in one transaction.
    Quartz(QuartzArgs),
}

/// The flags of `chime import quartz`.
#[derive(Debug, Args)]
pub struct QuartzArgs {
    /// The Quartz database, as a PostgreSQL URL (read only: nothing is written to it).
    #[arg(long)]
    from: String,
    /// Quartz's SCHED_NAME (default: the only scheduler in the store).
    #[arg(long)]
    scheduler: Option<String>,
    /// The tables' prefix; may name a schema (`myschema.QRTZ_`). Matched in any letter case.
    #[arg(long, default_value = "QRTZ_")]
    table_prefix: String,
    /// The Quartz nodes' `user.timezone` (an IANA zone): the zone of daily-time-interval
    /// triggers, and of calendars and cron triggers stored without one.
    #[arg(long)]
    jvm_time_zone: Option<String>,
    /// org.quartz.jobStore.misfireThreshold of the Quartz nodes.
    #[arg(long, default_value_t = 60_000)]
    misfire_threshold_ms: i64,
    /// CLASS=shell:COMMAND (run by `sh -c`) or CLASS=http:URL (the job data POSTed to it);
    /// repeat for each class.
    #[arg(long = "job-class", value_name = "CLASS=TARGET")]
    job_classes: Vec<String>,
    /// A file of CLASS=TARGET lines (`#` comments).
    #[arg(long = "job-classes", value_name = "FILE")]
    job_classes_file: Option<std::path::PathBuf>,
    /// Report what would be imported; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Overwrite what chime's store already has with Quartz's (before chime fires it).
    #[arg(long)]
    replace: bool,
    /// Import what can be read and leave what cannot (each named in the report).
    #[arg(long)]
    skip_unreadable: bool,
    /// The longest blob (job data, calendar, blob trigger) read, in bytes; a longer one is
    /// left in the store and its item reported as unreadable.
    #[arg(long, default_value_t = chime_quartz_import::source::DEFAULT_MAX_BLOB_BYTES)]
    max_blob_bytes: u64,
    /// Import although a Quartz node checked in recently.
    #[arg(long)]
    force: bool,
    /// The moment misfires and live nodes are judged at (RFC 3339; default: now).
    #[arg(long, hide = true)]
    now: Option<Timestamp>,
}

/// Runs an import verb.
pub async fn run(settings: &Settings, command: ImportCommand) -> Result<()> {
    let ImportCommand::Quartz(args) = command;
    let mut mappings = JobClassMappings::default();
    if let Some(file) = &args.job_classes_file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading --job-classes {}", file.display()))?;
        mappings.add_file(&text, &file.display().to_string())?;
    }
    for mapping in &args.job_classes {
        mappings.add(mapping, "--job-class")?;
    }
    if let Some(zone) = &args.jvm_time_zone {
        anyhow::ensure!(
            chime_core::schedule::named_zone(zone).is_some(),
            "--jvm-time-zone {zone:?} is not a time zone (an IANA name such as Europe/Berlin, \
             or an offset such as +05:30)"
        );
    }
    anyhow::ensure!(
        args.misfire_threshold_ms >= 0,
        "--misfire-threshold-ms must be 0 or more"
    );
    let now = args.now.unwrap_or_else(Timestamp::now);
    let options = ImportOptions {
        source: SourceOptions {
            scheduler: args.scheduler.clone(),
            table_prefix: args.table_prefix.clone(),
            force: args.force,
            now,
            max_blob_bytes: args.max_blob_bytes,
        },
        plan: PlanOptions {
            jvm_zone: args.jvm_time_zone.clone(),
            misfire_threshold: SignedDuration::from_millis(args.misfire_threshold_ms),
            mappings,
            now,
        },
        dry_run: args.dry_run,
        replace: args.replace,
        skip_unreadable: args.skip_unreadable,
    };
    let store = if args.dry_run {
        None
    } else {
        Some(
            Store::connect(&settings.database_url, 2)
                .await
                .context("opening chime's store")?,
        )
    };
    let outcome = import(&args.from, store.as_ref(), &options).await;
    if let Some(store) = store {
        store.close().await;
    }
    match outcome {
        Ok(report) => {
            print(&report, args.json)?;
            Ok(())
        }
        Err(ImportError::Unreadable(report)) => {
            print(&report, args.json)?;
            Err(ImportError::Unreadable(report).into())
        }
        Err(error) => Err(error.into()),
    }
}

fn print(report: &Report, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    let verb = if report.dry_run {
        "would import"
    } else {
        "imported"
    };
    let n = &report.imported;
    println!(
        "Quartz scheduler {:?} (tables {}): {verb} {} job(s), {} trigger(s) ({} recovery run(s)), \
         {} calendar(s), {} paused group(s)",
        report.scheduler,
        report.tables,
        n.jobs,
        n.triggers,
        n.recovery_runs,
        n.calendars,
        n.paused_groups
    );
    let list = |title: &str, items: &[chime_quartz_import::plan::Item]| {
        if !items.is_empty() {
            println!("\n{title}:");
            for item in items {
                println!("  {} {}: {}", item.kind, item.name, item.reason);
            }
        }
    };
    list("cannot be read", &report.failed);
    list("not imported", &report.skipped);
    if !report.needs_mapping.is_empty() {
        println!(
            "\nneeds a mapping (imported paused; import again with --job-class \
             CLASS=shell:COMMAND or CLASS=http:URL and --replace):"
        );
        for job in &report.needs_mapping {
            println!("  job {}: class {}", job.job, job.class);
        }
    }
    if !report.already_present.is_empty() {
        println!("\nalready in chime, left as they are (--replace overwrites):");
        for item in &report.already_present {
            println!("  {item}");
        }
    }
    if !report.warnings.is_empty() {
        println!("\nnotes:");
        for warning in &report.warnings {
            println!("  {warning}");
        }
    }
    if !report.triggers.is_empty() {
        println!("\ntriggers (next fires, in each one's zone):");
        for t in &report.triggers {
            println!(
                "  {} → job {} [{}] {}: {}",
                t.trigger,
                t.job,
                t.state,
                t.time_zone,
                t.next_fires.join(", ")
            );
        }
    }
    Ok(())
}
