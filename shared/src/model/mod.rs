//! The data chime moves around: tasks, submissions, executor specs and bus messages. Their serde
//! forms are the JSON of the API, the CLI and the bus.

pub mod kinds;
pub mod message;
pub mod submission;
pub mod task;

pub use kinds::{HttpSpec, NoopSpec, ShellCommand, ShellSpec, SpecError};
pub use message::{
    ControlCommand, ControlMessage, MESSAGE_VERSION, MessageError, SubmitMessage, TaskEvent,
    TaskMessage,
};
pub use submission::{Backoff, MAX_PAYLOAD_BYTES, NewTask, SubmissionError};
pub use task::{
    AttemptOutcome, AttemptView, JobRef, TaskResult, TaskStatus, TaskView, UnknownStatus,
    UnmetDependency,
};
