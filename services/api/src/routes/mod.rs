//! The API's routes, one module per resource.

pub mod health;
pub mod jobs;
pub mod schedule;
pub mod tasks;
pub mod workers;
