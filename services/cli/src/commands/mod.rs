//! One module per group of verbs.

pub mod jobs;
pub mod schedule;
pub mod services;
pub mod submit;
pub mod tasks;
pub mod workers;
