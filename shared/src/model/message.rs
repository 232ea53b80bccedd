//! Messages on the bus (docs/ARCHITECTURE.md, section 3). Every message is JSON with a `v` (schema version).
//!
//! A message never holds state that PostgreSQL does not also hold, except a [`SubmitMessage`],
//! which the worker writes to PostgreSQL when it first receives it.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::submission::NewTask;
use super::task::TaskStatus;

/// The schema version this build writes and reads.
pub const MESSAGE_VERSION: u32 = 1;

/// A message that cannot be used; the consumer dead-letters it with this reason.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// Not JSON, or not the expected shape.
    #[error("malformed message: {0}")]
    Malformed(#[from] serde_json::Error),
    /// A schema version this build does not know.
    #[error("unsupported message version {found} (this build reads {MESSAGE_VERSION})")]
    Version {
        /// The version found.
        found: u32,
    },
}

/// "Run attempt `attempt` of task `task_id`": published to `<prefix>.tasks` with the worker group as
/// routing key. Its fields are the book's AMQP reference (`chime docs` reads this schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskMessage {
    /// Schema version.
    pub v: u32,
    /// The task.
    pub task_id: Uuid,
    /// The attempt this message is for: a message for another attempt is stale.
    pub attempt: i32,
    /// Executor kind.
    pub kind: String,
    /// Worker group (also the routing key).
    pub group: String,
    /// The executor's input.
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// The task's data.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// The data time it runs for.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<Timestamp>,
    /// Timeout of the attempt.
    #[serde(default)]
    pub timeout_ms: Option<i64>,
    /// The OS user to run as.
    #[serde(default)]
    pub execute_user: Option<String>,
}

/// A task's lifecycle event: published to `<prefix>.events` with routing key
/// `task.<status>.<group>`. The outbox writes it with the SQL function `task_event`, which a
/// test holds to these fields; they are the book's AMQP reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskEvent {
    /// Schema version.
    pub v: u32,
    /// The task.
    pub task_id: Uuid,
    /// The attempt that produced the event.
    pub attempt: i32,
    /// The status the task moved to.
    pub status: TaskStatus,
    /// Its worker group.
    pub group: String,
    /// Its job, if any.
    #[serde(default)]
    pub job_id: Option<i64>,
    /// Its data time.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub data_time: Option<Timestamp>,
    /// Why, for an end other than success (`failed`, `lost`, `killed`, `upstream_failed`, …).
    #[serde(default)]
    pub reason: Option<String>,
    /// When the change was made.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
}

impl TaskEvent {
    /// The routing key on the events exchange.
    pub fn routing_key(&self) -> String {
        format!("task.{}.{}", self.status, self.group)
    }
}

/// A command for one worker, published to `<prefix>.control` with the worker's id as routing key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ControlMessage {
    /// Schema version.
    pub v: u32,
    /// What to do.
    pub command: ControlCommand,
    /// The task it is about (`kill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// The attempt it is about (`kill`): a command for an older attempt does nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i32>,
}

/// What a [`ControlMessage`] asks of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ControlCommand {
    /// Kill the attempt's process group; the task ends `killed`.
    Kill,
    /// Stop taking work, finish what runs, go offline (as on SIGTERM).
    Drain,
}

/// An ad-hoc task published by any AMQP client to `<prefix>.submit`: the fields of [`NewTask`]
/// beside `v`.
#[derive(Debug, Clone)]
pub struct SubmitMessage(pub NewTask);

impl SubmitMessage {
    /// Decodes a submission, refusing unknown versions and fields.
    pub fn decode(body: &[u8]) -> Result<NewTask, MessageError> {
        let mut value: serde_json::Value = serde_json::from_slice(body)?;
        let version = value
            .as_object_mut()
            .and_then(|fields| fields.remove("v"))
            .map(serde_json::from_value::<u32>)
            .transpose()?;
        match version {
            Some(MESSAGE_VERSION) => Ok(serde_json::from_value(value)?),
            Some(found) => Err(MessageError::Version { found }),
            None => Err(MessageError::Malformed(serde::de::Error::missing_field(
                "v",
            ))),
        }
    }

    /// Encodes a submission as a client publishes it: the fields it sets (an absent field and a
    /// null one mean the same), with the version.
    pub fn encode(&self) -> Vec<u8> {
        let mut value = serde_json::to_value(&self.0).unwrap_or_default();
        if let Some(fields) = value.as_object_mut() {
            fields.retain(|_, field| !field.is_null());
            fields.insert("v".into(), MESSAGE_VERSION.into());
        }
        value.to_string().into_bytes()
    }
}

/// Decodes a versioned message, refusing versions this build does not know.
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, MessageError> {
    #[derive(Deserialize)]
    struct Version {
        v: u32,
    }
    let Version { v } = serde_json::from_slice(body)?;
    if v != MESSAGE_VERSION {
        return Err(MessageError::Version { found: v });
    }
    Ok(serde_json::from_slice(body)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_garbage_and_unknown_versions() {
        assert!(matches!(
            decode::<TaskMessage>(b"not json"),
            Err(MessageError::Malformed(_))
        ));
        assert!(matches!(
            decode::<TaskMessage>(br#"{"v":2}"#),
            Err(MessageError::Version { found: 2 })
        ));
        assert!(matches!(
            decode::<TaskMessage>(br#"{"v":1,"task_id":"x"}"#),
            Err(MessageError::Malformed(_))
        ));
    }

    #[test]
    fn round_trips_a_task_message() {
        let message = TaskMessage {
            v: MESSAGE_VERSION,
            task_id: Uuid::now_v7(),
            attempt: 1,
            kind: "noop".into(),
            group: "default".into(),
            spec: serde_json::json!({}),
            data: serde_json::json!({"a": 1}),
            data_time: Some(Timestamp::UNIX_EPOCH),
            timeout_ms: None,
            execute_user: None,
        };
        let body = serde_json::to_vec(&message).unwrap();
        assert_eq!(decode::<TaskMessage>(&body).unwrap(), message);
    }

    #[test]
    fn decodes_a_submission() {
        let task = SubmitMessage::decode(br#"{"v":1,"kind":"noop","group":"etl"}"#).unwrap();
        assert_eq!(task.kind, "noop");
        assert_eq!(task.group.as_deref(), Some("etl"));
        assert!(SubmitMessage::decode(br#"{"kind":"noop"}"#).is_err());
        assert!(SubmitMessage::decode(br#"{"v":1,"kind":"noop","bogus":1}"#).is_err());
        let round = SubmitMessage(task).encode();
        let decoded = SubmitMessage::decode(&round).unwrap();
        assert_eq!(
            (decoded.kind.as_str(), decoded.group.as_deref()),
            ("noop", Some("etl"))
        );
        let fields: serde_json::Value = serde_json::from_slice(&round).unwrap();
        assert_eq!(
            fields,
            serde_json::json!({"v": 1, "kind": "noop", "group": "etl"}),
            "only the fields it sets"
        );
    }
}
