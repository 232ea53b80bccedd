//! The API's routes, one module per resource.

pub mod health;
pub mod tasks;
pub mod workers;
