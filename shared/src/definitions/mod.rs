//! Definitions as code: worker groups, routes, calendars, jobs with their triggers and
//! dependencies, kept in YAML files under version control and checked, planned and applied
//! from them (`chime validate`, `chime apply`, `chime export`, `chime schema`).
//!
//! - [`format`]: the file format, the API's own field names.
//! - [`read`]: files and directories to documents, with where every field is.
//! - [`check`]: what the API would refuse, found with no server, at `file:line:column`.
//! - [`plan`]: what an apply would create, update (field by field) and delete.
//! - [`schema`]: the format's JSON Schema, for editors.

pub mod check;
pub mod format;
pub mod plan;
pub mod read;
pub mod schema;

pub use check::{Report, check};
pub use format::{Definitions, DependencyDefinition, JobDefinition, TriggerDefinition};
pub use read::{Loaded, Problem, read, read_text};
