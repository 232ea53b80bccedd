//! The RabbitMQ transport (docs/ARCHITECTURE.md, section 3): the topology, a supervised connection, publishing
//! with confirms, dead-lettering, and the outbox relay.
//!
//! RabbitMQ carries messages; it never holds state PostgreSQL does not also hold. Consumers are
//! idempotent per (task, attempt), so a message published twice runs once.

pub mod connection;
pub mod grace;
pub mod publish;
pub mod relay;
pub mod topology;

pub use connection::{Broker, GroupQueues};
pub use publish::{BusError, dead_letter, publish_confirmed};
pub use relay::OutboxRelay;
pub use topology::Topology;
