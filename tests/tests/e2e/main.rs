//! End-to-end tests: real PostgreSQL, real RabbitMQ, each test isolated by its own database and
//! AMQP prefix. One test binary (these modules) keeps linking cheap.

mod adhoc;
mod bad_input;
mod book;
mod dashboard;
mod definitions;
mod definitions_apply;
mod dependencies;
mod failover;
mod faults;
mod firing;
mod firing_rules;
mod freezes;
mod logs;
mod notifications;
mod outbox;
mod package;
mod process;
mod quartz_import;
mod quartz_import_refusals;
mod quartz_xml;
mod results;
mod retention;
mod scale;
mod schedule;
mod security;
mod submissions;
mod triggers;
mod waits;
mod worker;
mod worker_process;
