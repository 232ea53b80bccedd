//! Exclusion calendars by name, shared by any number of triggers.

use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use utoipa::ToSchema;

use super::{Context, Store, StoreError};
use crate::schedule::{Calendar, CalendarSpec};

/// A named calendar.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NamedCalendar {
    /// Its name.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// The calendar, as JSON (see the book: docs/src/concepts/calendars.md).
    pub definition: CalendarSpec,
}

/// Checks the text and definition of a calendar; writes nothing.
fn check(calendar: &NamedCalendar) -> Result<(), StoreError> {
    let nul = |e: crate::model::NulInText| StoreError::Invalid(e.to_string());
    crate::model::check_text("description", &calendar.description).map_err(nul)?;
    let definition = serde_json::to_value(&calendar.definition).unwrap_or_default();
    crate::model::check_json("definition", &definition).map_err(nul)?;
    Calendar::compile(&calendar.definition).map_err(|e| StoreError::Invalid(e.to_string()))?;
    Ok(())
}

/// Creates a calendar after checking its definition; `source` is the definitions source that
/// made it (None: by hand).
pub async fn create(
    db: impl sqlx::PgExecutor<'_>,
    calendar: NamedCalendar,
    source: Option<&str>,
) -> Result<NamedCalendar, StoreError> {
    crate::model::check_name("calendar name", &calendar.name).map_err(StoreError::Invalid)?;
    check(&calendar)?;
    let inserted = sqlx::query(
        "INSERT INTO calendars (name, definition, description, source) VALUES ($1, $2, $3, $4)",
    )
    .bind(&calendar.name)
    .bind(Json(&calendar.definition))
    .bind(&calendar.description)
    .bind(source)
    .execute(db)
    .await;
    match inserted {
        Ok(_) => Ok(calendar),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Err(
            StoreError::Conflict(format!("calendar {} exists already", calendar.name)),
        ),
        Err(e) => Err(e).context("creating the calendar"),
    }
}

/// Replaces a calendar's definition; triggers that use it follow it from their next fire on.
/// `source` is the definitions source that updated it (None, by hand, keeps the one it had).
pub async fn update(
    db: impl sqlx::PgExecutor<'_>,
    calendar: NamedCalendar,
    source: Option<&str>,
) -> Result<NamedCalendar, StoreError> {
    check(&calendar)?;
    let done = sqlx::query(
        "UPDATE calendars SET definition = $2, description = $3,
                source = coalesce($4, source), updated_at = now()
         WHERE name = $1",
    )
    .bind(&calendar.name)
    .bind(Json(&calendar.definition))
    .bind(&calendar.description)
    .bind(source)
    .execute(db)
    .await
    .context("updating the calendar")?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("calendar {}", calendar.name)));
    }
    Ok(calendar)
}

/// Every calendar, by name.
pub async fn list(store: &Store) -> Result<Vec<NamedCalendar>, StoreError> {
    let rows: Vec<(String, String, Json<CalendarSpec>)> =
        sqlx::query_as("SELECT name, description, definition FROM calendars ORDER BY name")
            .fetch_all(store.pool())
            .await
            .context("listing calendars")?;
    Ok(rows
        .into_iter()
        .map(|(name, description, definition)| NamedCalendar {
            name,
            description,
            definition: definition.0,
        })
        .collect())
}

/// Deletes a calendar no trigger uses.
pub async fn delete(db: impl sqlx::PgExecutor<'_>, name: &str) -> Result<(), StoreError> {
    let deleted = sqlx::query("DELETE FROM calendars WHERE name = $1")
        .bind(name)
        .execute(db)
        .await;
    match deleted {
        Ok(done) if done.rows_affected() == 0 => {
            Err(StoreError::NotFound(format!("calendar {name}")))
        }
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23503") => Err(
            StoreError::Conflict(format!("calendar {name} is in use by a trigger")),
        ),
        Err(e) => Err(e).context("deleting the calendar"),
    }
}
