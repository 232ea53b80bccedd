//! The store's definitions as a definitions document (`chime export`, `GET /api/v1/definitions`):
//! worker groups, routes, calendars and jobs with their triggers and dependencies, not their
//! history; the plan from them to a document (`chime plan`, `chime apply --dry-run`); and the
//! apply of that plan in one transaction (`chime apply`).
//!
//! An apply runs under one advisory lock (two applies never interleave), reads the store,
//! plans, and makes each change through the same store functions the API's calls use, so a
//! job or trigger is checked as its own endpoint checks it. The first error rolls back every
//! change. Each change is recorded in the audit trail with its fields, the actor and the
//! source, in the same transaction: the trail holds exactly what committed.
//!
//! The same store exports the same document, byte for byte once written as YAML: every list in
//! the order of its names, and a setting left out only where it holds the default the API would
//! give it (a job's worker group is always written, since its default follows the kind's
//! route, which may change; the `default` worker group, which always exists, is not). A simple or calendar-interval trigger that was given no start is
//! written with the one it was given when made, so that the document, applied elsewhere, fires
//! at the same times. A trigger that has fired its last time (`complete`) is left out: the API
//! refuses to make a trigger that will never fire.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sqlx::FromRow;
use sqlx::types::Json;
use utoipa::ToSchema;

use super::calendars::NamedCalendar;
use super::dependencies::{OnUpstreamFailure, Window};
use super::kind_routes::KindRoute;
use super::worker_groups::NewWorkerGroup;
use super::{Context, Store, StoreError};
use crate::definitions::plan::{Action, Object, ObjectChange, Plan, Scope};
use crate::definitions::{Definitions, DependencyDefinition, JobDefinition, TriggerDefinition};
use crate::model::Backoff;
use crate::schedule::misfire::MisfirePolicy;
use crate::schedule::{CalendarSpec, ScheduleSpec};

#[derive(FromRow)]
struct JobRow {
    id: i64,
    group_name: String,
    name: String,
    description: String,
    kind: String,
    spec: Json<serde_json::Value>,
    worker_group: String,
    priority: i32,
    concurrent: bool,
    requests_recovery: bool,
    data: Json<serde_json::Value>,
    reject_retries: i32,
    reject_interval_ms: i64,
    failed_retries: i32,
    failed_interval_ms: i64,
    backoff: Json<Backoff>,
    timeout_ms: Option<i64>,
    data_time_period: Option<String>,
    data_time_zone: String,
    execute_user: Option<String>,
    retention_days: Option<i32>,
    expect_success_within_ms: Option<i64>,
}

#[derive(FromRow)]
struct TriggerRow {
    job_id: i64,
    group_name: String,
    name: String,
    description: String,
    schedule: Json<ScheduleSpec>,
    calendar_name: Option<String>,
    misfire_policy: Json<MisfirePolicy>,
    priority: i32,
    data: Json<serde_json::Value>,
    paused: bool,
    start_time: jiff_sqlx::Timestamp,
}

#[derive(FromRow)]
struct DependencyRow {
    job_id: i64,
    upstream: String,
    window: Json<Window>,
    on_upstream_failure: Json<OnUpstreamFailure>,
}

/// An apply's definitions and how to apply them (`POST /api/v1/definitions/plan` and
/// `/apply`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    /// The definitions, as the files hold them.
    pub definitions: Definitions,
    /// The source the objects are recorded with (`chime apply --source`; the CLI's default is
    /// the name of the directory or file applied). Without one, the plan takes nothing over
    /// and nothing can be pruned.
    #[serde(default)]
    pub source: Option<String>,
    /// Delete the objects of the same source that the definitions no longer hold.
    #[serde(default)]
    pub prune: bool,
    /// Delete a pruned job even while it has live tasks (and the dependencies on it).
    #[serde(default)]
    pub force: bool,
    /// Jobs and triggers to delete unless the definitions hold them, whatever their source
    /// (Quartz's `pre-processing-commands`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete: Vec<Removal>,
    /// What to do with an object the store has already (Quartz's `processing-directives`).
    #[serde(default)]
    pub existing: Existing,
}

/// Jobs or triggers an apply deletes unless its definitions hold them: Quartz's
/// `delete-jobs-in-group`, `delete-triggers-in-group`, `delete-job` and `delete-trigger`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Removal {
    /// `job` (with its triggers) or `trigger`.
    pub kind: RemovalKind,
    /// The group; `*` is every group.
    pub group: String,
    /// One object's name; absent, the whole group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What a [`Removal`] deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RemovalKind {
    /// Jobs, with their triggers and the dependencies on them.
    Job,
    /// Triggers.
    Trigger,
}

impl Removal {
    fn matches(&self, group: &str, name: &str) -> bool {
        (self.group == "*" || self.group == group) && self.name.as_deref().is_none_or(|n| n == name)
    }
}

/// What an apply does with an object its definitions hold that the store has already.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Existing {
    /// Change it to what the definitions say (Quartz's `overwrite-existing-data` true, its
    /// default).
    #[default]
    Update,
    /// Leave it as it is (`overwrite-existing-data` false, `ignore-duplicates` true).
    Keep,
    /// Refuse the apply (`overwrite-existing-data` false, `ignore-duplicates` false).
    Refuse,
}

/// The longest source name.
const MAX_SOURCE_CHARS: usize = 200;

/// Two applies never interleave: each reads the store and plans under this lock.
const APPLY_LOCK: i64 = 0x6368_696d_6561_7070; // "chimeapp"

impl ApplyRequest {
    fn source(&self) -> Result<Option<&str>, StoreError> {
        match self.source.as_deref() {
            None => {
                if self.prune {
                    return Err(StoreError::Invalid(
                        "prune needs a source: only the objects of the source applying are \
                         pruned"
                            .into(),
                    ));
                }
                Ok(None)
            }
            Some(source)
                if source.trim().is_empty() || source.chars().count() > MAX_SOURCE_CHARS =>
            {
                Err(StoreError::Invalid(format!(
                    "source {source:?}: use 1-{MAX_SOURCE_CHARS} characters"
                )))
            }
            Some(source) => {
                crate::model::check_text("source", source)
                    .map_err(|e| StoreError::Invalid(e.to_string()))?;
                Ok(Some(source))
            }
        }
    }
}

/// What applying `request` would do; changes nothing.
pub async fn plan(store: &Store, request: &ApplyRequest) -> Result<Plan, StoreError> {
    request.source()?;
    let mut tx = store.begin().await?;
    snapshot(&mut tx).await?;
    let current = export_in(&mut tx, &[], true).await?;
    let scope = scope_in(&mut tx, request, &current).await?;
    tx.commit().await.context("ending the plan's snapshot")?;
    plan_of(&current, request, &scope)
}

/// The plan from `current` to the request's definitions, after the checks only the store can
/// make: every upstream exists, and objects the store has already are what `existing` allows.
fn plan_of(
    current: &Definitions,
    request: &ApplyRequest,
    scope: &Scope,
) -> Result<Plan, StoreError> {
    let desired = &request.definitions;
    if let Some(why) = crate::definitions::plan::missing_upstream(current, desired, scope) {
        return Err(StoreError::Invalid(why));
    }
    if request.existing == Existing::Refuse {
        let jobs: BTreeSet<(&str, &str)> = current
            .jobs
            .iter()
            .map(|j| (j.group(), j.name.as_str()))
            .collect();
        let triggers: BTreeSet<(&str, &str)> = current
            .jobs
            .iter()
            .flat_map(|j| &j.triggers)
            .map(|t| (t.group(), t.name.as_str()))
            .collect();
        for job in &desired.jobs {
            if jobs.contains(&(job.group(), job.name.as_str())) {
                return Err(StoreError::Conflict(format!(
                    "job {}: exists already, and the definitions say not to overwrite it \
                     (processing-directives: overwrite-existing-data false, ignore-duplicates \
                     false)",
                    job.dotted()
                )));
            }
            for t in &job.triggers {
                if triggers.contains(&(t.group(), t.name.as_str())) {
                    return Err(StoreError::Conflict(format!(
                        "trigger {}.{}: exists already, and the definitions say not to overwrite \
                         it (processing-directives: overwrite-existing-data false, \
                         ignore-duplicates false)",
                        t.group(),
                        t.name
                    )));
                }
            }
        }
    }
    let mut plan = crate::definitions::plan::plan(current, desired, scope);
    if request.existing == Existing::Keep {
        plan.changes.retain(|c| c.action != Action::Update);
    }
    Ok(plan)
}

/// Applies `request` in one transaction and returns what it did (nothing when the plan is
/// empty). `actor` is recorded with each change in the audit trail; `may_run_as` says whether
/// the caller may have commands run as a job's `execute_user`, asked for each job the apply
/// writes (or whose triggers or dependencies it writes).
pub async fn apply(
    store: &Store,
    request: &ApplyRequest,
    actor: &str,
    may_run_as: impl Fn(Option<&str>) -> Result<(), String>,
) -> Result<Plan, StoreError> {
    let source = request.source()?;
    let desired = &request.definitions;
    let mut tx = store.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(APPLY_LOCK)
        .execute(&mut *tx)
        .await
        .context("taking the apply lock")?;
    let current = export_in(&mut tx, &[], true).await?;
    let scope = scope_in(&mut tx, request, &current).await?;
    let plan = plan_of(&current, request, &scope)?;

    let jobs: BTreeMap<(String, String), &JobDefinition> = desired
        .jobs
        .iter()
        .map(|j| ((j.group().to_string(), j.name.clone()), j))
        .collect();
    let triggers: BTreeMap<(String, String), (&JobDefinition, &TriggerDefinition)> = desired
        .jobs
        .iter()
        .flat_map(|j| j.triggers.iter().map(move |t| (j, t)))
        .map(|(j, t)| ((t.group().to_string(), t.name.clone()), (j, t)))
        .collect();
    let missing = |what: &Object| {
        StoreError::Invalid(format!(
            "{what}: not in the definitions (a name held twice?)"
        ))
    };
    // Who may run what: each job written, or whose triggers or dependencies are.
    for change in plan.changes.iter().filter(|c| c.action != Action::Delete) {
        let job = match &change.target {
            Some(Object::Job(g, n)) | Some(Object::Dependency((g, n), _)) => {
                jobs.get(&(g.clone(), n.clone())).copied()
            }
            Some(Object::Trigger(g, n)) => triggers.get(&(g.clone(), n.clone())).map(|(j, _)| *j),
            _ => None,
        };
        if let Some(job) = job {
            may_run_as(job.execute_user.as_deref())
                .map_err(|why| StoreError::Forbidden(format!("job {}: {why}", job.dotted())))?;
        }
    }

    // Dependencies and triggers are removed before anything is made: pruning `a on b` while
    // adding `b on a` is no cycle, and a job's new cron trigger is checked against the
    // dependencies without the interval trigger it replaces.
    let early = |c: &&ObjectChange| {
        c.action == Action::Delete
            && matches!(
                c.target,
                Some(Object::Dependency(..)) | Some(Object::Trigger(..))
            )
    };
    let order = plan
        .changes
        .iter()
        .filter(early)
        .chain(plan.changes.iter().filter(|c| !early(c)));
    let mut woken = false;
    for change in order {
        let Some(target) = &change.target else {
            continue;
        };
        let failed = |e: StoreError| e.within(&change.object);
        if change.action == Action::Update
            && change.fields.iter().all(|c| c.field == "source")
            && let Some(source) = source
        {
            adopt(&mut tx, target, source).await.map_err(failed)?;
            audit(&mut tx, actor, target, change, Some(source)).await?;
            continue;
        }
        match (target, change.action) {
            (Object::WorkerGroup(name), action) => {
                let group = desired.worker_groups.iter().find(|g| &g.name == name);
                match (action, group) {
                    (Action::Delete, _) => super::worker_groups::remove(&mut tx, name).await,
                    (Action::Create, Some(g)) => {
                        super::worker_groups::declare(&mut *tx, g, source).await
                    }
                    (Action::Update, Some(g)) => {
                        super::worker_groups::describe(&mut *tx, g, source).await
                    }
                    (_, None) => Err(missing(target)),
                }
            }
            (Object::Route(kind), action) => {
                let route = desired.routes.iter().find(|r| &r.kind == kind);
                match (action, route) {
                    (Action::Delete, _) => super::kind_routes::delete(&mut *tx, kind).await,
                    (_, Some(r)) => super::kind_routes::set(&mut *tx, r, source).await,
                    (_, None) => Err(missing(target)),
                }
            }
            (Object::Calendar(name), action) => {
                let calendar = desired.calendars.iter().find(|c| &c.name == name);
                match (action, calendar) {
                    (Action::Delete, _) => super::calendars::delete(&mut *tx, name).await,
                    (Action::Create, Some(c)) => {
                        super::calendars::create(&mut *tx, c.clone(), source)
                            .await
                            .map(drop)
                    }
                    (Action::Update, Some(c)) => {
                        super::calendars::update(&mut *tx, c.clone(), source)
                            .await
                            .map(drop)
                    }
                    (_, None) => Err(missing(target)),
                }
            }
            (Object::Job(group, name), Action::Delete) => {
                prune_job(&mut tx, group, name, request.force, source).await
            }
            (Object::Job(group, name), action) => match jobs.get(&(group.clone(), name.clone())) {
                Some(job) => {
                    let existing = (action == Action::Update).then_some(0);
                    super::jobs::save(&mut tx, job.new_job(), existing, source)
                        .await
                        .map(drop)
                }
                None => Err(missing(target)),
            },
            (Object::Trigger(group, name), _) => {
                woken = true;
                apply_trigger(&mut tx, change, group, name, &triggers, source)
                    .await
                    .and_then(|found| if found { Ok(()) } else { Err(missing(target)) })
            }
            (Object::Dependency((group, name), (upstream_group, upstream)), Action::Delete) => {
                super::dependencies::remove(&mut *tx, group, name, upstream_group, upstream).await
            }
            (Object::Dependency((group, name), (upstream_group, upstream)), _) => {
                let definition = jobs.get(&(group.clone(), name.clone())).and_then(|j| {
                    j.depends_on.iter().find(|d| {
                        crate::definitions::check::resolve_job(
                            &d.job,
                            &[(upstream_group.clone(), upstream.clone())].into(),
                        )
                        .is_some()
                    })
                });
                match definition {
                    Some(d) => super::dependencies::add_in(
                        &mut tx,
                        group,
                        name,
                        super::dependencies::NewDependency {
                            upstream: upstream.clone(),
                            upstream_group: Some(upstream_group.clone()),
                            window: d.window,
                            on_upstream_failure: d.on_upstream_failure,
                        },
                    )
                    .await
                    .map(drop),
                    None => Err(missing(target)),
                }
            }
        }
        .map_err(failed)?;
        audit(&mut tx, actor, target, change, source).await?;
    }
    if let Some(source) = source {
        // Told to keep what exists, the apply changed no existing trigger: its files' pauses
        // are recorded only for the triggers it made, so a pause changed there is not lost.
        let made: BTreeSet<(String, String)> = plan
            .changes
            .iter()
            .filter(|c| c.action == Action::Create)
            .filter_map(|c| match &c.target {
                Some(Object::Trigger(g, n)) => Some((g.clone(), n.clone())),
                _ => None,
            })
            .collect();
        let recorded: BTreeMap<(String, String), (&JobDefinition, &TriggerDefinition)> =
            if request.existing == Existing::Keep {
                triggers
                    .iter()
                    .filter(|(key, _)| made.contains(*key))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect()
            } else {
                triggers.clone()
            };
        record_applied_pauses(&mut tx, source, &recorded).await?;
    }
    if woken {
        super::triggers::wake_schedulers(&mut tx, store).await?;
    }
    tx.commit().await.context("committing the apply")?;
    Ok(plan)
}

/// Records one change in the audit trail, inside the apply's transaction.
async fn audit(
    tx: &mut sqlx::PgConnection,
    actor: &str,
    target: &Object,
    change: &ObjectChange,
    source: Option<&str>,
) -> Result<(), StoreError> {
    super::audit::record(
        &mut *tx,
        actor,
        "POST",
        "/api/v1/definitions/apply",
        200,
        Some(&super::audit::AuditDetail {
            object: Some(target.audit_name()),
            changes: super::patch::redacted(&change.fields),
            source: source.map(str::to_string),
        }),
    )
    .await
}

/// Records `source` on an object made by hand that the files now hold: from now on it is the
/// source's, overwritten by its applies and pruned when it leaves its files.
async fn adopt(
    tx: &mut sqlx::PgConnection,
    target: &Object,
    source: &str,
) -> Result<(), StoreError> {
    // Every statement takes a group (or the one name) and a name ('' where there is none).
    let (statement, first, second) = match target {
        Object::WorkerGroup(name) => (
            "UPDATE worker_groups SET source = $1 WHERE name = $2 AND $3 = '' AND source IS NULL",
            name.as_str(),
            "",
        ),
        Object::Route(kind) => (
            "UPDATE job_kind_routes SET source = $1 WHERE kind = $2 AND $3 = '' AND source IS NULL",
            kind.as_str(),
            "",
        ),
        Object::Calendar(name) => (
            "UPDATE calendars SET source = $1 WHERE name = $2 AND $3 = '' AND source IS NULL",
            name.as_str(),
            "",
        ),
        Object::Job(group, name) => (
            "UPDATE jobs SET source = $1 WHERE group_name = $2 AND name = $3 AND source IS NULL",
            group.as_str(),
            name.as_str(),
        ),
        Object::Trigger(group, name) => (
            "UPDATE triggers SET source = $1
             WHERE group_name = $2 AND name = $3 AND source IS NULL",
            group.as_str(),
            name.as_str(),
        ),
        Object::Dependency(..) => return Ok(()),
    };
    sqlx::query(statement)
        .bind(source)
        .bind(first)
        .bind(second)
        .execute(&mut *tx)
        .await
        .context("recording the object's source")?;
    Ok(())
}

/// Makes or updates one trigger as the plan's `change` says; false if the definitions do not
/// hold it.
async fn apply_trigger(
    tx: &mut sqlx::PgConnection,
    change: &ObjectChange,
    group: &str,
    name: &str,
    triggers: &BTreeMap<(String, String), (&JobDefinition, &TriggerDefinition)>,
    source: Option<&str>,
) -> Result<bool, StoreError> {
    use super::triggers;
    if change.action == Action::Delete {
        triggers::remove(&mut *tx, group, name).await?;
        return Ok(true);
    }
    let Some((job, definition)) = triggers.get(&(group.to_string(), name.to_string())) else {
        return Ok(false);
    };
    let trigger = definition.new_trigger(job);
    let paused = definition.paused.unwrap_or(false);
    if change.action == Action::Create {
        let applied = source.map(|source| triggers::Applied { source, paused });
        triggers::insert(&mut *tx, &trigger, applied).await?;
        // Without a source, nothing records the file's pause: the state is the file's.
        if applied.is_none() && paused {
            triggers::set_paused_in(&mut *tx, triggers::Target::Trigger(group, name), true).await?;
        }
        return Ok(true);
    }
    let changed = |field: &str| change.fields.iter().any(|c| c.field == field);
    if changed("schedule") || changed("calendar") {
        triggers::write_update(&mut *tx, group, name, &trigger, source).await?;
    } else if change
        .fields
        .iter()
        .any(|c| c.field != "paused" && c.field != "source")
    {
        triggers::write_settings(&mut *tx, group, name, &trigger, source).await?;
    }
    if changed("source")
        && let Some(source) = source
    {
        adopt(
            &mut *tx,
            &Object::Trigger(group.into(), name.into()),
            source,
        )
        .await?;
    }
    if changed("paused") {
        triggers::set_paused_in(&mut *tx, triggers::Target::Trigger(group, name), paused).await?;
    }
    Ok(true)
}

/// Deletes a job the apply prunes: refused while it has live tasks unless `force` (which also
/// removes the dependencies on it).
async fn prune_job(
    tx: &mut sqlx::PgConnection,
    group: &str,
    name: &str,
    force: bool,
    source: Option<&str>,
) -> Result<(), StoreError> {
    if !force {
        // Its triggers go with it: one made by hand or by another source is not this apply's.
        let others: Vec<String> = sqlx::query_scalar(
            "SELECT t.group_name || '.' || t.name FROM triggers t JOIN jobs j ON j.id = t.job_id
             WHERE j.group_name = $1 AND j.name = $2 AND t.source IS DISTINCT FROM $3
             ORDER BY 1",
        )
        .bind(group)
        .bind(name)
        .bind(source)
        .fetch_all(&mut *tx)
        .await
        .context("finding the job's other triggers")?;
        if !others.is_empty() {
            return Err(StoreError::Conflict(format!(
                "it has triggers made by hand or by another source ({}), which would go with \
                 it: delete them, or prune with --force",
                others.join(", ")
            )));
        }
        let live: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks t JOIN jobs j ON j.id = t.job_id
             WHERE j.group_name = $1 AND j.name = $2
               AND t.status IN ('waiting', 'ready', 'running', 'retrying')",
        )
        .bind(group)
        .bind(name)
        .fetch_one(&mut *tx)
        .await
        .context("counting the job's live tasks")?;
        if live > 0 {
            return Err(StoreError::Conflict(format!(
                "{live} live task(s): kill them or let them end, or prune with --force"
            )));
        }
    }
    super::jobs::remove(tx, group, name, force).await
}

/// Records, for every trigger the definitions hold, the `paused` they say: the next apply of
/// the source applies a pause only when this changed.
async fn record_applied_pauses(
    tx: &mut sqlx::PgConnection,
    source: &str,
    triggers: &BTreeMap<(String, String), (&JobDefinition, &TriggerDefinition)>,
) -> Result<(), StoreError> {
    let mut groups = Vec::with_capacity(triggers.len());
    let mut names = Vec::with_capacity(triggers.len());
    let mut paused = Vec::with_capacity(triggers.len());
    for ((group, name), (_, t)) in triggers {
        groups.push(group.as_str());
        names.push(name.as_str());
        paused.push(t.paused.unwrap_or(false));
    }
    sqlx::query(
        "UPDATE triggers t SET source_paused = a.paused
         FROM UNNEST($1::text[], $2::text[], $3::bool[]) AS a(group_name, name, paused)
         WHERE t.group_name = a.group_name AND t.name = a.name AND t.source = $4
           AND t.source_paused IS DISTINCT FROM a.paused",
    )
    .bind(&groups)
    .bind(&names)
    .bind(&paused)
    .bind(source)
    .execute(&mut *tx)
    .await
    .context("recording the triggers' applied pauses")?;
    Ok(())
}

/// Reads what the plan needs of the applying source: its triggers' recorded pauses, and (when
/// pruning) the objects it made, which it may delete.
async fn scope_in(
    tx: &mut sqlx::PgConnection,
    request: &ApplyRequest,
    current: &Definitions,
) -> Result<Scope, StoreError> {
    let mut scope = Scope::default();
    let names: BTreeSet<(String, String)> = current
        .jobs
        .iter()
        .map(|j| (j.group().to_string(), j.name.clone()))
        .collect();
    // What the definitions say to delete, whoever made it: a job with its triggers and the
    // dependencies on and of it.
    let removed_job = |group: &str, name: &str| {
        request
            .delete
            .iter()
            .any(|r| r.kind == RemovalKind::Job && r.matches(group, name))
    };
    for job in &current.jobs {
        let job_removed = removed_job(job.group(), &job.name);
        if job_removed {
            scope
                .prunable
                .insert(Object::Job(job.group().to_string(), job.name.clone()));
        }
        for t in &job.triggers {
            if job_removed
                || request
                    .delete
                    .iter()
                    .any(|r| r.kind == RemovalKind::Trigger && r.matches(t.group(), &t.name))
            {
                scope
                    .prunable
                    .insert(Object::Trigger(t.group().to_string(), t.name.clone()));
            }
        }
    }
    if !request.delete.is_empty() {
        for job in &current.jobs {
            for d in &job.depends_on {
                if let Some(upstream) = crate::definitions::check::resolve_job(&d.job, &names)
                    && (removed_job(job.group(), &job.name)
                        || removed_job(&upstream.0, &upstream.1))
                {
                    scope.prunable.insert(Object::Dependency(
                        (job.group().to_string(), job.name.clone()),
                        upstream,
                    ));
                }
            }
        }
    }
    let Some(source) = request.source.clone() else {
        return Ok(scope);
    };
    scope.source = Some(source.clone());
    // Every object made by hand or by this source, in one read.
    #[derive(FromRow)]
    struct Sourced {
        kind: String,
        a: String,
        b: String,
        by_hand: bool,
        paused: Option<bool>,
    }
    let rows: Vec<Sourced> = sqlx::query_as(
        "SELECT 'worker_group' AS kind, name AS a, '' AS b, source IS NULL AS by_hand,
                NULL::bool AS paused
             FROM worker_groups WHERE (source IS NULL AND name <> 'default') OR source = $1
         UNION ALL SELECT 'route', kind, '', source IS NULL, NULL FROM job_kind_routes
             WHERE source IS NULL OR source = $1
         UNION ALL SELECT 'calendar', name, '', source IS NULL, NULL FROM calendars
             WHERE source IS NULL OR source = $1
         UNION ALL SELECT 'job', group_name, name, source IS NULL, NULL FROM jobs
             WHERE source IS NULL OR source = $1
         UNION ALL SELECT 'trigger', group_name, name, source IS NULL, source_paused
             FROM triggers WHERE source IS NULL OR source = $1",
    )
    .bind(&source)
    .fetch_all(&mut *tx)
    .await
    .context("reading the objects' sources")?;
    let mut made_here = BTreeSet::new();
    for Sourced {
        kind,
        a,
        b,
        by_hand,
        paused,
    } in rows
    {
        let object = match kind.as_str() {
            "worker_group" => Object::WorkerGroup(a),
            "route" => Object::Route(a),
            "calendar" => Object::Calendar(a),
            "job" => Object::Job(a, b),
            _ => Object::Trigger(a, b),
        };
        if by_hand {
            scope.made_by_hand.insert(object);
            continue;
        }
        if let Some(paused) = paused {
            scope.applied_paused.insert(object.clone(), paused);
        }
        if request.prune {
            scope.prunable.insert(object.clone());
        }
        made_here.insert(object);
    }
    // A dependency goes with its downstream job's source.
    if request.prune {
        for job in &current.jobs {
            let object = Object::Job(job.group().to_string(), job.name.clone());
            if !made_here.contains(&object) {
                continue;
            }
            for d in &job.depends_on {
                if let Some(upstream) = crate::definitions::check::resolve_job(&d.job, &names) {
                    scope.prunable.insert(Object::Dependency(
                        (job.group().to_string(), job.name.clone()),
                        upstream,
                    ));
                }
            }
        }
    }
    Ok(scope)
}

/// Makes the transaction one consistent, read-only snapshot.
async fn snapshot(tx: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .context("starting a snapshot")?;
    Ok(())
}

/// The store's definitions; only the jobs of `job_groups` (with the calendars their triggers
/// name, and no worker groups or routes) when any is given.
pub async fn export(store: &Store, job_groups: &[String]) -> Result<Definitions, StoreError> {
    let mut tx = store.begin().await?;
    // One snapshot: a job deleted between two reads would leave its triggers behind.
    snapshot(&mut tx).await?;
    let definitions = export_in(&mut tx, job_groups, false).await?;
    tx.commit().await.context("ending the export's snapshot")?;
    Ok(definitions)
}

/// [`export`] inside the caller's transaction; with `complete`, also the triggers that have
/// fired their last time (an apply must know they exist: it leaves one unchanged as it is, and
/// restarts one whose settings changed).
async fn export_in(
    tx: &mut sqlx::PgConnection,
    job_groups: &[String],
    complete: bool,
) -> Result<Definitions, StoreError> {
    let whole = job_groups.is_empty();
    let jobs: Vec<JobRow> = sqlx::query_as(
        "SELECT id, group_name, name, description, kind, spec, worker_group, priority,
                concurrent, requests_recovery, data, reject_retries, reject_interval_ms,
                failed_retries, failed_interval_ms, backoff, timeout_ms, data_time_period,
                data_time_zone, execute_user, retention_days, expect_success_within_ms
         FROM jobs WHERE $1 OR group_name = ANY($2)
         ORDER BY group_name COLLATE \"C\", name COLLATE \"C\"",
    )
    .bind(whole)
    .bind(job_groups)
    .fetch_all(&mut *tx)
    .await
    .context("reading the jobs")?;
    let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
    let triggers: Vec<TriggerRow> = sqlx::query_as(
        "SELECT job_id, group_name, name, description, schedule, calendar_name,
                to_jsonb(misfire_policy) AS misfire_policy, priority, data,
                state IN ('paused', 'paused_blocked') AS paused, start_time
         FROM triggers WHERE job_id = ANY($1) AND ($2 OR state <> 'complete')
         ORDER BY group_name COLLATE \"C\", name COLLATE \"C\"",
    )
    .bind(&ids)
    .bind(complete)
    .fetch_all(&mut *tx)
    .await
    .context("reading the triggers")?;
    let dependencies: Vec<DependencyRow> = sqlx::query_as(
        "SELECT d.job_id, u.group_name || '.' || u.name AS upstream,
                to_jsonb(d.\"window\") AS window,
                to_jsonb(d.on_upstream_failure) AS on_upstream_failure
         FROM job_dependencies d JOIN jobs u ON u.id = d.depends_on_job_id
         WHERE d.job_id = ANY($1)
         ORDER BY u.group_name COLLATE \"C\", u.name COLLATE \"C\"",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await
    .context("reading the dependencies")?;
    let named: BTreeSet<&str> = triggers
        .iter()
        .filter_map(|t| t.calendar_name.as_deref())
        .collect();
    let calendars: Vec<(String, String, Json<CalendarSpec>)> = sqlx::query_as(
        "SELECT name, description, definition FROM calendars
         ORDER BY name COLLATE \"C\"",
    )
    .fetch_all(&mut *tx)
    .await
    .context("reading the calendars")?;
    let calendars = calendars
        .into_iter()
        .filter(|(name, _, _)| whole || named.contains(name.as_str()))
        .map(|(name, description, definition)| NamedCalendar {
            name,
            description,
            definition: definition.0,
        })
        .collect();
    let (worker_groups, routes) = if whole {
        let groups: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, description FROM worker_groups WHERE name <> 'default'
             ORDER BY name COLLATE \"C\"",
        )
        .fetch_all(&mut *tx)
        .await
        .context("reading the worker groups")?;
        let routes: Vec<(String, String)> = sqlx::query_as(
            "SELECT kind, worker_group FROM job_kind_routes ORDER BY kind COLLATE \"C\"",
        )
        .fetch_all(&mut *tx)
        .await
        .context("reading the routes")?;
        (
            groups
                .into_iter()
                .map(|(name, description)| NewWorkerGroup { name, description })
                .collect(),
            routes
                .into_iter()
                .map(|(kind, worker_group)| KindRoute { kind, worker_group })
                .collect(),
        )
    } else {
        (Vec::new(), Vec::new())
    };

    let mut triggers_of: BTreeMap<i64, Vec<TriggerDefinition>> = BTreeMap::new();
    for t in triggers {
        triggers_of.entry(t.job_id).or_default().push(trigger(t));
    }
    let mut upstreams_of: BTreeMap<i64, Vec<DependencyDefinition>> = BTreeMap::new();
    for d in dependencies {
        upstreams_of.entry(d.job_id).or_default().push(
            DependencyDefinition {
                job: d.upstream,
                window: Some(d.window.0),
                on_upstream_failure: Some(d.on_upstream_failure.0),
            }
            .normalized(),
        );
    }
    let jobs = jobs
        .into_iter()
        .map(|row| {
            let id = row.id;
            let mut job = job(row);
            job.triggers = triggers_of.remove(&id).unwrap_or_default();
            job.depends_on = upstreams_of.remove(&id).unwrap_or_default();
            job
        })
        .collect();
    Ok(Definitions {
        worker_groups,
        routes,
        calendars,
        jobs,
    })
}

fn job(r: JobRow) -> JobDefinition {
    JobDefinition {
        group: Some(r.group_name),
        name: r.name,
        description: Some(r.description),
        kind: r.kind,
        spec: r.spec.0,
        worker_group: Some(r.worker_group),
        priority: Some(r.priority),
        concurrent: Some(r.concurrent),
        requests_recovery: Some(r.requests_recovery),
        data: r.data.0,
        reject_retries: Some(r.reject_retries),
        reject_interval_ms: Some(r.reject_interval_ms),
        failed_retries: Some(r.failed_retries),
        failed_interval_ms: Some(r.failed_interval_ms),
        backoff: Some(r.backoff.0),
        timeout_ms: r.timeout_ms,
        data_time_period: r.data_time_period,
        data_time_zone: Some(r.data_time_zone),
        execute_user: r.execute_user,
        retention_days: r.retention_days,
        expect_success_within_ms: r.expect_success_within_ms,
        triggers: Vec::new(),
        depends_on: Vec::new(),
    }
    .normalized()
}

fn trigger(t: TriggerRow) -> TriggerDefinition {
    // The start a trigger was given when made anchors the phase of an interval: written out,
    // the same fires follow wherever the document is applied.
    let schedule = t.schedule.0.anchored_at(t.start_time.to_jiff());
    TriggerDefinition {
        group: Some(t.group_name),
        name: t.name,
        schedule,
        calendar: t.calendar_name,
        misfire_policy: Some(t.misfire_policy.0),
        priority: Some(t.priority),
        description: Some(t.description),
        data: t.data.0,
        paused: Some(t.paused),
    }
    .normalized()
}
