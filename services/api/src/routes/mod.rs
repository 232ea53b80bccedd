//! The API's routes, one module per resource.

pub mod access;
pub mod backfills;
pub mod definitions;
pub mod health;
pub mod jobs;
pub mod logs;
pub mod overview;
pub mod retention;
pub mod schedule;
pub mod tasks;
pub mod webhooks;
pub mod worker_groups;
pub mod workers;

/// A path id that must be a UUID; `what` names it in the 400 answer ("task", "worker").
pub(crate) fn parse_uuid(id: &str, what: &str) -> Result<uuid::Uuid, crate::error::ApiError> {
    uuid::Uuid::parse_str(id).map_err(|_| {
        crate::error::ApiError::bad_request(format!("{id:?} is not a {what} id (a UUID)"))
    })
}
