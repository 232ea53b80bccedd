//! chime-core: what every chime service shares.
//!
//! - [`model`]: tasks, submissions, executor specs and bus messages, with the JSON forms of the API,
//!   the CLI and the bus;
//! - [`store`]: the PostgreSQL job store, the source of truth; [`store::task_lifecycle`] is the one
//!   place a task's status moves;
//! - [`bus`]: the RabbitMQ topology, a supervised connection, publishing with confirms and the
//!   outbox relay;
//! - [`config`]: settings from flags, environment and `chime.toml`;
//! - [`telemetry`]: logs and Prometheus metrics;
//! - [`schedule`]: the schedule engine (cron, simple, calendar-interval, daily-time-interval
//!   triggers, calendars, misfires), pure;
//! - [`node`]: the store, broker and relay one process shares between its services;
//! - [`redact`]: what may be shown of a value that can carry a secret.

pub mod bus;
pub mod config;
pub mod definitions;
pub mod model;
pub mod node;
pub mod redact;
pub mod schedule;
pub mod store;
pub mod telemetry;

pub use config::Settings;
pub use node::Node;
pub use store::Store;
