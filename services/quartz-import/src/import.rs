//! One import, start to end: read the Quartz store, plan, and (unless a dry run) write.
//!
//! ```text
//!   source::read (one REPEATABLE READ, READ ONLY transaction; a live node refuses)
//!     │
//!   plan::plan (pure: what chime gets, what is skipped, what cannot be read)
//!     │── something cannot be read, without --skip-unreadable ──▶ Unreadable(report), nothing written
//!     │── --dry-run ──▶ the report
//!   write::write (one transaction: all or nothing; what exists stays unless --replace)
//!     │
//!   the report
//! ```

use chime_core::store::Store;

use crate::plan::{self, PlanOptions, Report};
use crate::source::{self, SourceError, SourceOptions};
use crate::write::{self, WriteError};

/// How to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Which store, and how to read it.
    pub source: SourceOptions,
    /// How to read what it does not say.
    pub plan: PlanOptions,
    /// Report only.
    pub dry_run: bool,
    /// Overwrite what chime's store already has.
    pub replace: bool,
    /// Import what can be read, leaving what cannot.
    pub skip_unreadable: bool,
}

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The store could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Some items cannot be read; the report names them.
    #[error(
        "{} item(s) cannot be imported (listed under failed); nothing was written. Fix them, or \
         give --skip-unreadable to import the rest",
        .0.failed.len()
    )]
    Unreadable(Box<Report>),
    /// chime's store refused the import.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Imports the Quartz store at `from` into `store` (None: a dry run that needs no chime store).
pub async fn import(
    from: &str,
    store: Option<&Store>,
    options: &ImportOptions,
) -> Result<Report, ImportError> {
    let quartz = source::read(from, &options.source).await?;
    let plan = plan::plan(&quartz, &options.plan);
    let mut report = plan.report.clone();
    report.dry_run = options.dry_run || store.is_none();
    if !report.failed.is_empty() && !options.skip_unreadable {
        return Err(ImportError::Unreadable(Box::new(report)));
    }
    if let (false, Some(store)) = (report.dry_run, store) {
        let written = write::write(store, &plan, options.replace).await?;
        report.already_present = written.already_present;
    }
    Ok(report)
}
