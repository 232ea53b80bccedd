//! The data chime moves around: tasks, submissions, executor specs and bus messages. Their serde
//! forms are the JSON of the API, the CLI and the bus.

pub mod identity;
pub mod kinds;
pub mod message;
pub mod names;
pub mod submission;
pub mod task;
pub mod text;

pub use identity::{ANY_USER, Identity, Role, UnknownRole};
pub use kinds::{HttpSpec, NoopSpec, ShellCommand, ShellSpec, SpecError, runs_instantly};
pub use message::{
    ControlCommand, ControlMessage, MESSAGE_VERSION, MessageError, SubmitMessage, TaskEvent,
    TaskMessage,
};
pub use names::check_name;
pub use submission::{Backoff, MAX_PAYLOAD_BYTES, NewTask, SubmissionError};
pub use task::{
    AttemptOutcome, AttemptView, JobRef, TaskResult, TaskStatus, TaskSummary, TaskView,
    UnknownStatus, UnmetDependency,
};
pub use text::{NulInText, check_json, check_opt_text, check_text};
