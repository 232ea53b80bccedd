//! Writing a [`Plan`] into chime's store: one transaction, so an import is all or nothing, and
//! one statement per table, so 10,000 triggers are a handful of round trips.
//!
//! What is already there (by group and name, or a calendar's name) is left as it is and
//! reported, so a second run makes nothing twice; `--replace` overwrites it with what Quartz
//! has instead, which is for a cut-over chime has not started firing yet.

use chime_core::schedule::ScheduleSpec;
use chime_core::store::{Store, StoreError, triggers};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use sqlx::types::Json;

use crate::plan::{ALL_GROUPS_PAUSED, Plan};

/// A job as the `jsonb_to_recordset` of its statement reads it.
#[derive(Serialize)]
struct JobRecord<'a> {
    group_name: &'a str,
    name: &'a str,
    description: &'a str,
    kind: &'a str,
    spec: &'a Value,
    concurrent: bool,
    persist_data: bool,
    requests_recovery: bool,
    durable: bool,
    paused: bool,
    data: &'a RawValue,
}

/// A trigger as the `jsonb_to_recordset` of its statement reads it.
#[derive(Serialize)]
struct TriggerRecord<'a> {
    group_name: &'a str,
    name: &'a str,
    job_group: &'a str,
    job_name: &'a str,
    description: &'a str,
    schedule: &'a ScheduleSpec,
    calendar_name: Option<&'a str>,
    misfire_policy: &'a str,
    priority: i32,
    state: &'a str,
    start_time: Timestamp,
    end_time: Option<Timestamp>,
    next_fire_time: Timestamp,
    prev_fire_time: Option<Timestamp>,
    times_triggered: i64,
    data: &'a RawValue,
}

/// What was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Items already in chime's store and left (or, with `--replace`, overwritten), as
    /// `kind group.name`.
    pub already_present: Vec<String>,
    /// Items written anew or overwritten.
    pub written: usize,
}

/// Why the plan could not be written; nothing was.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// chime's store refused or could not be reached.
    #[error("{what}: {said}")]
    Store {
        /// What was being written.
        what: &'static str,
        /// What happened.
        said: String,
    },
    /// The store's own checks.
    #[error(transparent)]
    Checks(#[from] StoreError),
}

fn store_error(what: &'static str) -> impl FnOnce(sqlx::Error) -> WriteError {
    move |error| WriteError::Store {
        what,
        said: crate::source::said(&error),
    }
}

/// Writes `plan` in one transaction.
pub async fn write(store: &Store, plan: &Plan, replace: bool) -> Result<Written, WriteError> {
    let mut tx = store.begin().await?;
    let mut written = Written::default();

    let calendars: Vec<Value> = plan
        .calendars
        .iter()
        .map(|c| json!({"name": c.name, "definition": c.definition, "description": c.description}))
        .collect();
    let conflict = if replace {
        "DO UPDATE SET definition = EXCLUDED.definition, description = EXCLUDED.description, \
         updated_at = now()"
    } else {
        "DO NOTHING"
    };
    let made: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "INSERT INTO calendars (name, definition, description)
         SELECT name, definition, description
         FROM jsonb_to_recordset($1) AS r(name text, definition jsonb, description text)
         ON CONFLICT (name) {conflict}
         RETURNING name"
    )))
    .bind(Value::Array(calendars))
    .fetch_all(&mut *tx)
    .await
    .map_err(store_error("writing the calendars"))?;
    note_present(
        &mut written,
        "calendar",
        plan.calendars.iter().map(|c| c.name.clone()),
        made,
        (!replace).then_some(""),
    );

    // Rows are serialized straight into the statement's parameter: each job's data stays the
    // text it was planned as, never a second tree in memory.
    let jobs: Vec<JobRecord<'_>> = plan
        .jobs
        .iter()
        .map(|j| JobRecord {
            group_name: &j.group,
            name: &j.name,
            description: &j.description,
            kind: &j.kind,
            spec: &j.spec,
            concurrent: j.concurrent,
            persist_data: j.persist_data,
            requests_recovery: j.requests_recovery,
            durable: j.durable,
            paused: j.paused,
            data: &j.data,
        })
        .collect();
    let conflict = if replace {
        "DO UPDATE SET description = EXCLUDED.description, kind = EXCLUDED.kind, \
         spec = EXCLUDED.spec, concurrent = EXCLUDED.concurrent, \
         persist_data = EXCLUDED.persist_data, requests_recovery = EXCLUDED.requests_recovery, \
         durable = EXCLUDED.durable, paused = EXCLUDED.paused, data = EXCLUDED.data, \
         updated_at = now()"
    } else {
        "DO NOTHING"
    };
    let made: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "INSERT INTO jobs (group_name, name, description, kind, spec, concurrent, persist_data,
                           requests_recovery, durable, paused, data)
         SELECT group_name, name, description, kind, spec, concurrent, persist_data,
                requests_recovery, durable, paused, data
         FROM jsonb_to_recordset($1) AS r(group_name text, name text, description text,
              kind text, spec jsonb, concurrent boolean, persist_data boolean,
              requests_recovery boolean, durable boolean, paused boolean, data jsonb)
         ON CONFLICT (group_name, name) {conflict}
         RETURNING group_name || '/' || name"
    )))
    .bind(Json(jobs))
    .fetch_all(&mut *tx)
    .await
    .map_err(store_error("writing the jobs"))?;
    note_present(
        &mut written,
        "job",
        plan.jobs.iter().map(|j| format!("{}/{}", j.group, j.name)),
        made,
        (!replace).then_some(""),
    );

    // Paused groups before triggers: a trigger of a paused group is written paused.
    let mut groups = plan.paused_groups.clone();
    if plan.all_groups_paused {
        groups.push(ALL_GROUPS_PAUSED.to_string());
    }
    let made: Vec<String> = sqlx::query_scalar(
        "INSERT INTO paused_trigger_groups (group_name) SELECT unnest($1::text[])
         ON CONFLICT DO NOTHING RETURNING group_name",
    )
    .bind(&groups)
    .fetch_all(&mut *tx)
    .await
    .map_err(store_error("writing the paused trigger groups"))?;
    written.written += made.len();

    let rows: Vec<TriggerRecord<'_>> = plan
        .triggers
        .iter()
        .map(|t| TriggerRecord {
            group_name: &t.group,
            name: &t.name,
            job_group: &t.job_group,
            job_name: &t.job_name,
            description: &t.description,
            schedule: &t.schedule,
            calendar_name: t.calendar.as_deref(),
            misfire_policy: t.misfire_policy.as_str(),
            priority: t.priority,
            state: t.state,
            start_time: t.start_time,
            end_time: t.schedule.end_time(),
            next_fire_time: t.next_fire_time,
            prev_fire_time: t.prev_fire_time,
            times_triggered: t.times_triggered,
            data: &t.data,
        })
        .collect();
    // --replace never touches a trigger chime has fired (or completed): putting Quartz's next
    // fire back would fire again what chime already fired.
    let conflict = if replace {
        "DO UPDATE SET job_id = EXCLUDED.job_id, description = EXCLUDED.description, \
         schedule = EXCLUDED.schedule, calendar_name = EXCLUDED.calendar_name, \
         misfire_policy = EXCLUDED.misfire_policy, priority = EXCLUDED.priority, \
         state = EXCLUDED.state, start_time = EXCLUDED.start_time, end_time = EXCLUDED.end_time, \
         next_fire_time = EXCLUDED.next_fire_time, prev_fire_time = EXCLUDED.prev_fire_time, \
         times_triggered = EXCLUDED.times_triggered, data = EXCLUDED.data, updated_at = now() \
         WHERE triggers.state <> 'complete' \
           AND NOT EXISTS (SELECT 1 FROM fired_triggers f WHERE f.trigger_id = triggers.id)"
    } else {
        "DO NOTHING"
    };
    let made: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "INSERT INTO triggers (group_name, name, job_id, description, schedule, calendar_name,
                               misfire_policy, priority, state, start_time, end_time,
                               next_fire_time, prev_fire_time, times_triggered, data)
         SELECT r.group_name, r.name, j.id, r.description, r.schedule, r.calendar_name,
                r.misfire_policy, r.priority,
                -- A job paused in chime, or a paused group, holds it as creating it would.
                CASE WHEN r.state = 'waiting' AND (j.paused OR EXISTS (
                         SELECT 1 FROM paused_trigger_groups p
                         WHERE p.group_name IN (r.group_name, '_$_ALL_GROUPS_PAUSED_$_')))
                     THEN 'paused' ELSE r.state END,
                r.start_time, r.end_time,
                r.next_fire_time, r.prev_fire_time, r.times_triggered, r.data
         FROM jsonb_to_recordset($1) AS r(group_name text, name text, job_group text,
              job_name text, description text, schedule jsonb, calendar_name text,
              misfire_policy text, priority integer, state text, start_time timestamptz,
              end_time timestamptz, next_fire_time timestamptz, prev_fire_time timestamptz,
              times_triggered bigint, data jsonb)
         JOIN jobs j ON j.group_name = r.job_group AND j.name = r.job_name
         ON CONFLICT (group_name, name) {conflict}
         RETURNING group_name || '/' || name"
    )))
    .bind(Json(rows))
    .fetch_all(&mut *tx)
    .await
    .map_err(store_error("writing the triggers"))?;
    note_present(
        &mut written,
        "trigger",
        plan.triggers
            .iter()
            .map(|t| format!("{}/{}", t.group, t.name)),
        made,
        Some(if replace {
            " (chime has fired it; left as it is)"
        } else {
            ""
        }),
    );

    triggers::wake_schedulers(&mut tx, store).await?;
    tx.commit()
        .await
        .map_err(store_error("committing the import"))?;
    Ok(written)
}

/// Counts what `made` says was written, and lists the planned items it does not name, each
/// followed by `why` (None: not listed).
fn note_present(
    written: &mut Written,
    kind: &str,
    planned: impl Iterator<Item = String>,
    made: Vec<String>,
    why: Option<&str>,
) {
    let made: std::collections::HashSet<String> = made.into_iter().collect();
    written.written += made.len();
    let Some(why) = why else {
        return;
    };
    written.already_present.extend(
        planned
            .filter(|p| !made.contains(p))
            // Keyed by `group/name` (a name cannot hold a '/'), shown as `group.name`.
            .map(|p| format!("{kind} {}{why}", p.replacen('/', ".", 1))),
    );
}
