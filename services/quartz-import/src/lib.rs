//! `chime import quartz`: moves a stopped Quartz 2.x cluster onto chime by reading its JDBC job
//! store (the `QRTZ_*` tables) and writing the same jobs, triggers, calendars and pauses into
//! chime's store.
//!
//! The Java-serialized blobs Quartz keeps (job data, calendars, blob triggers) are read by
//! [`java`], a reader of the Java Object Serialization stream that builds values and never runs
//! or loads anything, with hard limits on depth, length and handles. On it, one module per
//! column turns Quartz's objects into chime's forms: [`job_data`] (`JOB_DATA`, Java-serialized
//! or Properties text, to JSON), [`calendars`] (`CALENDAR` to a `CalendarSpec` chain) and
//! [`blob_triggers`] (`BLOB_DATA` to a `ScheduleSpec`); [`zones`] maps Java time-zone ids.

pub mod blob_triggers;
pub mod calendars;
pub mod import;
pub mod java;
pub mod job_data;
pub mod mapping;
pub mod plan;
pub mod source;
pub mod write;
pub mod xml;
pub mod zones;

#[cfg(test)]
mod tests;
