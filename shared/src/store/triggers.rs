//! Triggers: when a job fires. Created with their first fire time computed, so the scheduler
//! only ever reads `next_fire_time`.
//!
//! ```text
//!   waiting ──acquired and fired──▶ waiting (next fire) … ──no fire left──▶ complete
//!      │  ▲                                    
//!      │  └──── resume ─── paused
//!      └── job running, concurrent=false ──▶ blocked ──task ends──▶ waiting
//! ```

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sqlx::FromRow;
use sqlx::types::Json;
use utoipa::ToSchema;

use super::patch::Change;
use super::{Context, Store, StoreError};
use crate::schedule::misfire::MisfirePolicy;
use crate::schedule::{Calendar, CalendarSpec, Schedule, ScheduleSpec, format_fire_time};

/// The paused group that stands for every group, present and future: Quartz's `pauseAll()`
/// marker, kept under Quartz's own name so an imported store means what it meant. A trigger
/// created while it is there is born paused. `chime trigger pause-group` of it pauses every
/// trigger (pauseAll); `resume-group` of it lifts every group's pause and resumes every trigger
/// not paused by its job (resumeAll).
pub const ALL_GROUPS: &str = "_$_ALL_GROUPS_PAUSED_$_";

/// How many future fire times `show` lists unless asked for another count.
pub const NEXT_FIRES: usize = 10;

/// The most future fire times one `show` computes.
pub const MAX_NEXT_FIRES: usize = 1000;

/// A trigger as the API takes it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTrigger {
    /// Group (default `default`).
    #[serde(default, deserialize_with = "crate::model::names::deserialize_nfc_opt")]
    pub group: Option<String>,
    /// Name, unique in its group.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub name: String,
    /// The job's group (default `default`).
    #[serde(default, deserialize_with = "crate::model::names::deserialize_nfc_opt")]
    pub job_group: Option<String>,
    /// The job's name.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub job: String,
    /// The schedule, as JSON (see the book: docs/src/concepts/triggers-and-schedules.md).
    pub schedule: ScheduleSpec,
    /// An exclusion calendar, by name.
    #[serde(default)]
    pub calendar: Option<String>,
    /// What to do when a fire is missed (default smart).
    #[serde(default)]
    pub misfire_policy: Option<MisfirePolicy>,
    /// Higher fires first when due together (default 5).
    #[serde(default)]
    pub priority: Option<i32>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Data added to each task.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

/// A stored trigger.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TriggerView {
    /// Its id.
    pub id: i64,
    /// Group.
    pub group: String,
    /// Name.
    pub name: String,
    /// The job's group.
    pub job_group: String,
    /// The job's name.
    pub job: String,
    /// The schedule.
    pub schedule: ScheduleSpec,
    /// Its calendar.
    pub calendar: Option<String>,
    /// Misfire policy.
    pub misfire_policy: MisfirePolicy,
    /// Priority.
    pub priority: i32,
    /// waiting, acquired, blocked, paused, paused_blocked, complete or error.
    pub state: String,
    /// When it fires next.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_fire_time: Option<Timestamp>,
    /// When it fired last.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub prev_fire_time: Option<Timestamp>,
    /// How many times it fired.
    pub times_triggered: i64,
    /// Its next fire times (in `show`), RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_fires: Vec<String>,
}

#[derive(FromRow)]
struct TriggerRow {
    id: i64,
    group_name: String,
    name: String,
    job_group: String,
    job_name: String,
    schedule: Json<ScheduleSpec>,
    calendar_name: Option<String>,
    calendar: Option<Json<CalendarSpec>>,
    misfire_policy: String,
    priority: i32,
    state: String,
    start_time: jiff_sqlx::Timestamp,
    next_fire_time: Option<jiff_sqlx::Timestamp>,
    prev_fire_time: Option<jiff_sqlx::Timestamp>,
    times_triggered: i64,
}

const SELECT_TRIGGERS: &str = "SELECT t.id, t.group_name, t.name, j.group_name AS job_group, \
     j.name AS job_name, t.schedule, t.calendar_name, c.definition AS calendar, t.misfire_policy, \
     t.priority, t.state, t.start_time, t.next_fire_time, t.prev_fire_time, t.times_triggered \
     FROM triggers t JOIN jobs j ON j.id = t.job_id LEFT JOIN calendars c ON c.name = t.calendar_name";

impl TriggerRow {
    /// The view, with the next `fires` fire times.
    fn into_view(self, fires: usize) -> TriggerView {
        let next_fire_time = self.next_fire_time.map(|t| t.to_jiff());
        let next_fires = match next_fire_time {
            Some(next) if fires > 0 => self.next_fires(next, fires),
            _ => Vec::new(),
        };
        TriggerView {
            id: self.id,
            group: self.group_name,
            name: self.name,
            job_group: self.job_group,
            job: self.job_name,
            schedule: self.schedule.0,
            calendar: self.calendar_name,
            misfire_policy: self.misfire_policy.parse().unwrap_or_default(),
            priority: self.priority,
            state: self.state,
            next_fire_time,
            prev_fire_time: self.prev_fire_time.map(|t| t.to_jiff()),
            times_triggered: self.times_triggered,
            next_fires,
        }
    }

    fn next_fires(&self, next: Timestamp, count: usize) -> Vec<String> {
        let Ok(schedule) = Schedule::compile(&self.schedule.0, self.start_time.to_jiff()) else {
            return Vec::new();
        };
        let calendar = self
            .calendar
            .as_ref()
            .and_then(|c| Calendar::compile(&c.0).ok());
        let mut fires = vec![format_fire_time(next)];
        let mut at = next;
        let mut times = self.times_triggered;
        while fires.len() < count.min(MAX_NEXT_FIRES) {
            times += 1;
            match schedule.next_fire_time(at, times, calendar.as_ref()) {
                Some(fire) => {
                    fires.push(format_fire_time(fire));
                    at = fire;
                }
                None => break,
            }
        }
        fires
    }
}

/// A trigger checked against its job, calendar and schedule, with its first fire time.
struct Prepared {
    group: String,
    job_id: i64,
    schedule: Schedule,
    policy: MisfirePolicy,
    first: Timestamp,
    data: serde_json::Value,
}

/// Checks a trigger inside `tx` (the database's clock is its "now"); writes nothing.
async fn prepare(
    tx: &mut sqlx::PgConnection,
    trigger: &NewTrigger,
) -> Result<Prepared, StoreError> {
    let group = trigger.group.clone().unwrap_or_else(|| "default".into());
    for (what, name) in [("trigger group", &group), ("trigger name", &trigger.name)] {
        crate::model::check_name(what, name).map_err(StoreError::Invalid)?;
    }
    let nul = |e: crate::model::NulInText| StoreError::Invalid(e.to_string());
    crate::model::check_text("job", &trigger.job).map_err(nul)?;
    crate::model::check_opt_text("job_group", trigger.job_group.as_deref()).map_err(nul)?;
    crate::model::check_opt_text("calendar", trigger.calendar.as_deref()).map_err(nul)?;
    crate::model::check_opt_text("description", trigger.description.as_deref()).map_err(nul)?;
    crate::model::check_json("data", &trigger.data).map_err(nul)?;
    let job_group = trigger
        .job_group
        .clone()
        .unwrap_or_else(|| "default".into());
    let job_id: Option<i64> =
        sqlx::query_scalar("SELECT id FROM jobs WHERE group_name = $1 AND name = $2")
            .bind(&job_group)
            .bind(&trigger.job)
            .fetch_optional(&mut *tx)
            .await
            .context("looking up the job")?;
    let job_id = job_id
        .ok_or_else(|| StoreError::Invalid(format!("unknown job {job_group}.{}", trigger.job)))?;
    let calendar = match &trigger.calendar {
        Some(name) => {
            let definition: Option<Json<CalendarSpec>> =
                sqlx::query_scalar("SELECT definition FROM calendars WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await
                    .context("looking up the calendar")?;
            let definition = definition
                .ok_or_else(|| StoreError::Invalid(format!("unknown calendar {name}")))?;
            Some(Calendar::compile(&definition.0).map_err(|e| StoreError::Invalid(e.to_string()))?)
        }
        None => None,
    };
    // The database's clock, not this node's, is the cluster's time.
    let now: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut *tx)
        .await
        .context("reading the clock")?;
    let schedule = Schedule::compile(&trigger.schedule, now.to_jiff())
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    let policy = trigger.misfire_policy.unwrap_or_default();
    policy
        .check(&schedule)
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    let first = schedule.first_fire_time(calendar.as_ref()).ok_or_else(|| {
        StoreError::Invalid("the schedule (with its calendar) will never fire".into())
    })?;
    let data = if trigger.data.is_null() {
        serde_json::json!({})
    } else {
        trigger.data.clone()
    };
    Ok(Prepared {
        group,
        job_id,
        schedule,
        policy,
        first,
        data,
    })
}

/// Creates a trigger with its first fire time, after checking its job, calendar, schedule and
/// misfire policy; wakes the schedulers. Nothing is written when any check fails.
pub async fn create(store: &Store, trigger: NewTrigger) -> Result<TriggerView, StoreError> {
    let mut tx = store.begin().await?;
    let group = insert(&mut tx, &trigger, None).await?;
    wake_schedulers(&mut tx, store).await?;
    tx.commit().await.context("committing the trigger")?;
    get(store, &group, &trigger.name, NEXT_FIRES).await
}

/// What a definitions source says of a trigger it writes: its name, and whether its files say
/// the trigger is paused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applied<'a> {
    pub source: &'a str,
    pub paused: bool,
}

/// Writes a new trigger inside `tx` (checked as [`create`] does) and returns its group; paused
/// from the start if `applied` says so. The caller wakes the schedulers.
pub(crate) async fn insert(
    tx: &mut sqlx::PgConnection,
    trigger: &NewTrigger,
    applied: Option<Applied<'_>>,
) -> Result<String, StoreError> {
    let Prepared {
        group,
        job_id,
        schedule,
        policy,
        first,
        data,
    } = prepare(&mut *tx, trigger).await?;
    let inserted: Result<i64, sqlx::Error> = sqlx::query_scalar(
        "INSERT INTO triggers (group_name, name, job_id, description, schedule, calendar_name,
                               misfire_policy, priority, state, start_time, end_time,
                               next_fire_time, data, source, source_paused)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                 CASE WHEN EXISTS (SELECT 1 FROM paused_trigger_groups
                                   WHERE group_name IN ($1, '_$_ALL_GROUPS_PAUSED_$_'))
                      OR (SELECT paused FROM jobs WHERE id = $3)
                      OR coalesce($14, false) THEN 'paused' ELSE 'waiting' END,
                 $9, $10, $11, $12, $13, $14)
         RETURNING id",
    )
    .bind(&group)
    .bind(&trigger.name)
    .bind(job_id)
    .bind(trigger.description.clone().unwrap_or_default())
    .bind(Json(&trigger.schedule))
    .bind(&trigger.calendar)
    .bind(policy.as_str())
    .bind(trigger.priority.unwrap_or(super::jobs::DEFAULT_PRIORITY))
    .bind(jiff_sqlx::Timestamp::from(schedule.start))
    .bind(schedule.end.map(jiff_sqlx::Timestamp::from))
    .bind(jiff_sqlx::Timestamp::from(first))
    .bind(Json(data))
    .bind(applied.map(|a| a.source))
    .bind(applied.map(|a| a.paused))
    .fetch_one(&mut *tx)
    .await;
    if let Err(sqlx::Error::Database(e)) = &inserted
        && e.code().as_deref() == Some("23505")
    {
        return Err(StoreError::Conflict(format!(
            "trigger {group}.{} exists already",
            trigger.name
        )));
    }
    inserted.context("creating the trigger")?;
    if let Some(why) = super::dependencies::never_meeting(&mut *tx, job_id).await? {
        return Err(StoreError::Invalid(why));
    }
    Ok(group)
}

/// Replaces a trigger's job, schedule, calendar, policy, priority and data (Quartz's
/// rescheduleJob): it restarts from its new first fire time, fire count zero; its state is kept
/// (a paused trigger stays paused). Nothing is written when any check fails.
pub async fn update(
    store: &Store,
    group: &str,
    name: &str,
    trigger: NewTrigger,
) -> Result<TriggerView, StoreError> {
    let trigger = NewTrigger {
        group: Some(group.to_string()),
        name: name.to_string(),
        ..trigger
    };
    let mut tx = store.begin().await?;
    write_update(&mut tx, group, name, &trigger, None).await?;
    wake_schedulers(&mut tx, store).await?;
    tx.commit().await.context("committing the trigger")?;
    get(store, group, name, NEXT_FIRES).await
}

/// Writes a trigger's new settings, restarting it from its new first fire. `source` is the
/// definitions source that wrote them (None, by hand, keeps the one it had).
pub(crate) async fn write_update(
    tx: &mut sqlx::PgConnection,
    group: &str,
    name: &str,
    trigger: &NewTrigger,
    source: Option<&str>,
) -> Result<(), StoreError> {
    let prepared = prepare(&mut *tx, trigger).await?;
    let updated = sqlx::query(
        "UPDATE triggers SET job_id = $3, description = $4, schedule = $5, calendar_name = $6,
                misfire_policy = $7, priority = $8, start_time = $9, end_time = $10,
                next_fire_time = $11, prev_fire_time = NULL, times_triggered = 0, data = $12,
                state = CASE WHEN state NOT IN ('complete', 'error') THEN state
                             WHEN EXISTS (SELECT 1 FROM paused_trigger_groups
                                          WHERE group_name IN ($1, '_$_ALL_GROUPS_PAUSED_$_'))
                                  OR (SELECT paused FROM jobs WHERE id = $3) THEN 'paused'
                             ELSE 'waiting' END,
                source = coalesce($13, source), updated_at = now()
         WHERE group_name = $1 AND name = $2",
    )
    .bind(group)
    .bind(name)
    .bind(prepared.job_id)
    .bind(trigger.description.clone().unwrap_or_default())
    .bind(Json(&trigger.schedule))
    .bind(&trigger.calendar)
    .bind(prepared.policy.as_str())
    .bind(trigger.priority.unwrap_or(super::jobs::DEFAULT_PRIORITY))
    .bind(jiff_sqlx::Timestamp::from(prepared.schedule.start))
    .bind(prepared.schedule.end.map(jiff_sqlx::Timestamp::from))
    .bind(jiff_sqlx::Timestamp::from(prepared.first))
    .bind(Json(prepared.data))
    .bind(source)
    .execute(&mut *tx)
    .await
    .context("updating the trigger")?;
    if updated.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("trigger {group}.{name}")));
    }
    Ok(())
}

/// A trigger after an update, and what the update changed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TriggerUpdate {
    /// The trigger as it is now.
    pub trigger: TriggerView,
    /// Each setting that changed, before and after (empty: nothing did).
    pub changes: Vec<Change>,
}

/// Changes only the settings `patch` names (a JSON merge patch over the trigger as
/// [`NewTrigger`] has it), in one transaction. A new schedule or calendar restarts the trigger
/// from its new first fire, as [`update`] does; any other change (priority, misfire policy,
/// job, data, description) keeps its next fire and fire count. The group and name cannot change.
/// `may_run_as` says whether the caller may have commands run as each `execute_user` of the
/// trigger's job (after the patch) and of the jobs its success makes tasks for.
pub async fn patch(
    store: &Store,
    group: &str,
    name: &str,
    patch: &serde_json::Value,
    may_run_as: impl Fn(Option<&str>) -> Result<(), String>,
) -> Result<TriggerUpdate, StoreError> {
    #[derive(FromRow)]
    struct Row {
        job_group: String,
        job_name: String,
        schedule: Json<ScheduleSpec>,
        calendar_name: Option<String>,
        misfire_policy: String,
        priority: i32,
        description: String,
        data: Json<serde_json::Value>,
    }
    let mut tx = store.begin().await?;
    let row: Option<Row> = sqlx::query_as(
        "SELECT j.group_name AS job_group, j.name AS job_name, t.schedule, t.calendar_name,
                t.misfire_policy, t.priority, t.description, t.data
         FROM triggers t JOIN jobs j ON j.id = t.job_id
         WHERE t.group_name = $1 AND t.name = $2
         FOR NO KEY UPDATE OF t",
    )
    .bind(group)
    .bind(name)
    .fetch_optional(&mut *tx)
    .await
    .context("reading the trigger")?;
    let Some(row) = row else {
        return Err(StoreError::NotFound(format!("trigger {group}.{name}")));
    };
    let current = NewTrigger {
        group: Some(group.to_string()),
        name: name.to_string(),
        job_group: Some(row.job_group),
        job: row.job_name,
        schedule: row.schedule.0,
        calendar: row.calendar_name,
        misfire_policy: Some(
            row.misfire_policy
                .parse()
                .map_err(|e| StoreError::Invalid(format!("the stored misfire policy: {e}")))?,
        ),
        priority: Some(row.priority),
        description: Some(row.description).filter(|d| !d.is_empty()),
        data: row.data.0,
    };
    let (before, after) = super::patch::apply(
        &current,
        patch,
        &["group", "name"],
        &["schedule", "data"],
        "trigger",
    )?;
    let trigger: NewTrigger = super::patch::settings(after, "trigger")?;
    let json = |t: &NewTrigger| {
        serde_json::to_value(t).map_err(|e| StoreError::Invalid(format!("the trigger: {e}")))
    };
    let job_group = trigger.job_group.as_deref().unwrap_or("default");
    for (job, user) in
        // On the transaction's own connection: one that holds the trigger's row lock must not
        // wait for a second from the pool.
        super::dependencies::execute_users(&mut *tx, job_group, &trigger.job, false).await?
    {
        may_run_as(user.as_deref())
            .map_err(|why| StoreError::Forbidden(format!("job {job}: {why}")))?;
    }
    let changes = super::patch::changes(&before, &json(&trigger)?);
    let restart = changes
        .iter()
        .any(|c| c.field == "schedule" || c.field == "calendar");
    if restart {
        write_update(&mut tx, group, name, &trigger, None).await?;
    } else if !changes.is_empty() {
        write_settings(&mut tx, group, name, &trigger, None).await?;
    }
    wake_schedulers(&mut tx, store).await?;
    tx.commit().await.context("committing the trigger")?;
    Ok(TriggerUpdate {
        trigger: get(store, group, name, NEXT_FIRES).await?,
        changes,
    })
}

/// Writes the settings of a trigger that do not move its fires (job, description, misfire
/// policy, priority, data): its next fire and fire count stay. `source` as [`write_update`].
pub(crate) async fn write_settings(
    tx: &mut sqlx::PgConnection,
    group: &str,
    name: &str,
    trigger: &NewTrigger,
    source: Option<&str>,
) -> Result<(), StoreError> {
    let prepared = prepare(&mut *tx, trigger).await?;
    let updated = sqlx::query(
        "UPDATE triggers SET job_id = $3, description = $4, misfire_policy = $5,
                priority = $6, data = $7, source = coalesce($8, source), updated_at = now()
         WHERE group_name = $1 AND name = $2",
    )
    .bind(group)
    .bind(name)
    .bind(prepared.job_id)
    .bind(trigger.description.clone().unwrap_or_default())
    .bind(prepared.policy.as_str())
    .bind(trigger.priority.unwrap_or(super::jobs::DEFAULT_PRIORITY))
    .bind(Json(prepared.data))
    .bind(source)
    .execute(&mut *tx)
    .await
    .context("updating the trigger")?;
    if updated.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("trigger {group}.{name}")));
    }
    Ok(())
}

/// Tells the schedulers that a trigger may be due sooner than they planned (a hint: they poll
/// too). Delivered when the transaction commits.
pub async fn wake_schedulers(tx: &mut sqlx::PgConnection, store: &Store) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(store.triggers_channel())
        .execute(tx)
        .await
        .context("waking the schedulers")?;
    Ok(())
}

/// A trigger by group and name, with its next `fires` fire times (at most [`MAX_NEXT_FIRES`]).
pub async fn get(
    store: &Store,
    group: &str,
    name: &str,
    fires: usize,
) -> Result<TriggerView, StoreError> {
    let row: Option<TriggerRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT_TRIGGERS} WHERE t.group_name = $1 AND t.name = $2"
    )))
    .bind(group)
    .bind(name)
    .fetch_optional(store.pool())
    .await
    .context("reading the trigger")?;
    match row {
        Some(row) => Ok(row.into_view(fires)),
        None => Err(super::not_found_in_group(store, "triggers", "trigger", group, name).await),
    }
}

/// Every trigger, by group and name.
pub async fn list(store: &Store) -> Result<Vec<TriggerView>, StoreError> {
    let rows: Vec<TriggerRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT_TRIGGERS} ORDER BY t.group_name, t.name"
    )))
    .fetch_all(store.pool())
    .await
    .context("listing triggers")?;
    Ok(rows.into_iter().map(|r| r.into_view(0)).collect())
}

/// What a pause or resume applies to.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// One trigger, by group and name.
    Trigger(&'a str, &'a str),
    /// Every trigger of a group, and triggers added to it later.
    Group(&'a str),
    /// Every trigger of a job, by the job's group and name.
    Job(&'a str, &'a str),
}

/// Pauses triggers: a paused trigger does not fire; one blocked by its job stays blocked too.
/// Returns how many triggers changed.
pub async fn pause(store: &Store, target: Target<'_>) -> Result<u64, StoreError> {
    set_paused(store, target, true).await
}

/// Resumes triggers and wakes the schedulers; a fire time that passed while a trigger was
/// paused follows the trigger's misfire policy (however short the pause: the fires were not
/// missed by accident), so a `smart` trigger fires once now rather than every missed time.
pub async fn resume(store: &Store, target: Target<'_>) -> Result<u64, StoreError> {
    set_paused(store, target, false).await
}

async fn set_paused(store: &Store, target: Target<'_>, paused: bool) -> Result<u64, StoreError> {
    let mut tx = store.begin().await?;
    let changed = set_paused_in(&mut tx, target, paused).await?;
    if let Target::Trigger(group, name) = target
        && changed == 0
    {
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM triggers WHERE group_name = $1 AND name = $2)",
        )
        .bind(group)
        .bind(name)
        .fetch_one(&mut *tx)
        .await
        .context("looking up the trigger")?;
        if !exists {
            drop(tx);
            return Err(super::not_found_in_group(store, "triggers", "trigger", group, name).await);
        }
    }
    if !paused {
        wake_schedulers(&mut tx, store).await?;
    }
    tx.commit().await.context("committing the pause")?;
    Ok(changed)
}

/// Pauses or resumes `target` inside `tx` and returns how many triggers changed; the caller
/// wakes the schedulers after a resume.
pub(crate) async fn set_paused_in(
    tx: &mut sqlx::PgConnection,
    target: Target<'_>,
    paused: bool,
) -> Result<u64, StoreError> {
    // Which triggers, and the record of the pause for groups and jobs.
    let (filter, a, b) = match target {
        Target::Trigger(group, name) => ("t.group_name = $2 AND t.name = $3", group, name),
        Target::Group(group) => {
            // The marker of every group is Quartz's pauseAll / resumeAll: resuming it lifts
            // every group's pause, as resumeAll does.
            let statement = match (paused, group == ALL_GROUPS) {
                (true, _) => {
                    "INSERT INTO paused_trigger_groups (group_name) VALUES ($1) ON CONFLICT DO NOTHING"
                }
                (false, false) => "DELETE FROM paused_trigger_groups WHERE group_name = $1",
                (false, true) => "DELETE FROM paused_trigger_groups WHERE $1 <> ''",
            };
            sqlx::query(statement)
                .bind(group)
                .execute(&mut *tx)
                .await
                .context("recording the group's pause")?;
            // The marker of every group applies to every trigger.
            (
                "(t.group_name = $2 OR $2 = '_$_ALL_GROUPS_PAUSED_$_') AND $3 = ''",
                group,
                "",
            )
        }
        Target::Job(group, name) => {
            let found =
                sqlx::query("UPDATE jobs SET paused = $3 WHERE group_name = $1 AND name = $2")
                    .bind(group)
                    .bind(name)
                    .bind(paused)
                    .execute(&mut *tx)
                    .await
                    .context("recording the job's pause")?;
            if found.rows_affected() == 0 {
                return Err(StoreError::NotFound(format!("job {group}.{name}")));
            }
            (
                "t.job_id = (SELECT id FROM jobs WHERE group_name = $2 AND name = $3)",
                group,
                name,
            )
        }
    };
    // A trigger stays paused while its group or its job is paused. The marker of every group
    // only decides the state a trigger is created in, as in Quartz: existing triggers were
    // paused (or resumed) by their state.
    let statement = format!(
        "UPDATE triggers t SET state = CASE
             WHEN $1 AND t.state = 'waiting' THEN 'paused'
             WHEN $1 AND t.state = 'blocked' THEN 'paused_blocked'
             WHEN NOT $1 AND t.state = 'paused' THEN 'waiting'
             WHEN NOT $1 AND t.state = 'paused_blocked' THEN 'blocked'
             ELSE t.state END,
           resumed_at = CASE WHEN NOT $1 AND t.state IN ('paused', 'paused_blocked')
                             THEN now() ELSE t.resumed_at END,
           updated_at = now()
         WHERE {filter}
           AND t.state IN ('waiting', 'blocked', 'paused', 'paused_blocked')
           AND ($1 OR NOT (
               EXISTS (SELECT 1 FROM paused_trigger_groups p WHERE p.group_name = t.group_name)
               OR (SELECT paused FROM jobs j WHERE j.id = t.job_id)))"
    );
    let changed = sqlx::query(sqlx::AssertSqlSafe(statement))
        .bind(paused)
        .bind(a)
        .bind(b)
        .execute(&mut *tx)
        .await
        .context("pausing or resuming triggers")?
        .rows_affected();
    Ok(changed)
}

/// Deletes a trigger (its fired history stays).
pub async fn delete(store: &Store, group: &str, name: &str) -> Result<(), StoreError> {
    let done = sqlx::query("DELETE FROM triggers WHERE group_name = $1 AND name = $2")
        .bind(group)
        .bind(name)
        .execute(store.pool())
        .await
        .context("deleting the trigger")?;
    if done.rows_affected() == 0 {
        return Err(super::not_found_in_group(store, "triggers", "trigger", group, name).await);
    }
    Ok(())
}

/// Deletes a trigger on `db` (inside an apply's transaction); a missing one is not found.
pub(crate) async fn remove(
    db: impl sqlx::PgExecutor<'_>,
    group: &str,
    name: &str,
) -> Result<(), StoreError> {
    let done = sqlx::query("DELETE FROM triggers WHERE group_name = $1 AND name = $2")
        .bind(group)
        .bind(name)
        .execute(db)
        .await
        .context("deleting the trigger")?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("trigger {group}.{name}")));
    }
    Ok(())
}
