//! The plan between what the store holds and what the files say: each object to create, each to
//! update with its changed fields (before → after), and, when pruning, each of the same source
//! to delete. Objects are compared as the store would hold them: a setting the file leaves out
//! and one it sets to the API's default are the same, and a job without a worker group goes
//! where its kind's route sends it.
//!
//! An object's source (the apply that made or last changed it) is not compared as a setting:
//! an apply records it on what it makes or updates, takes over (a `source` change) what the
//! files hold that was made by hand, and deletes only its own source's objects. A
//! trigger's `paused` is an operator's action: the files' value is applied when the trigger is
//! made, and after that only when it changed in the files since this source's last apply (so a
//! pause made in the dashboard outlives the next deploy).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::check::resolve_job;
use super::format::{Definitions, DependencyDefinition, JobDefinition, TriggerDefinition};
use crate::store::patch::{Change, changes};

/// What a change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Makes the object.
    Create,
    /// Changes some of its settings.
    Update,
    /// Removes it.
    Delete,
}

/// An object a definitions document holds, by its names. Ordered as the objects must be made:
/// a route needs its worker group, a trigger its job and calendar, a dependency both jobs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Object {
    /// A worker group, by name.
    WorkerGroup(String),
    /// A kind's route, by kind.
    Route(String),
    /// A calendar, by name.
    Calendar(String),
    /// A job, by group and name.
    Job(String, String),
    /// A trigger, by group and name.
    Trigger(String, String),
    /// A dependency: the downstream job and the upstream, each by group and name.
    Dependency((String, String), (String, String)),
}

impl Object {
    /// Every object [`fmt::Display`] could have written as `text`: a name may hold dots
    /// (Quartz's groups often do), so `job a.b.c` is group `a`, name `b.c` or group `a.b`,
    /// name `c`.
    pub fn parse(text: &str) -> Vec<Self> {
        let splits = |s: &str| -> Vec<(String, String)> {
            s.match_indices('.')
                .map(|(i, _)| (s[..i].to_string(), s[i + 1..].to_string()))
                .collect()
        };
        if let Some(name) = text.strip_prefix("worker group ") {
            return vec![Object::WorkerGroup(name.to_string())];
        }
        if let Some(kind) = text.strip_prefix("route ") {
            return vec![Object::Route(kind.to_string())];
        }
        if let Some(name) = text.strip_prefix("calendar ") {
            return vec![Object::Calendar(name.to_string())];
        }
        if let Some(job) = text.strip_prefix("job ") {
            return splits(job)
                .into_iter()
                .map(|(g, n)| Object::Job(g, n))
                .collect();
        }
        if let Some(trigger) = text.strip_prefix("trigger ") {
            return splits(trigger)
                .into_iter()
                .map(|(g, n)| Object::Trigger(g, n))
                .collect();
        }
        let Some(rest) = text.strip_prefix("dependency ") else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for (at, _) in rest.match_indices(" on ") {
            let (job, upstream) = (&rest[..at], &rest[at + 4..]);
            for j in splits(job) {
                for u in splits(upstream) {
                    found.push(Object::Dependency(j.clone(), u));
                }
            }
        }
        found
    }

    /// The name the audit trail gives the object (`worker-group etl`, `kind-route hive`; the
    /// others as [`fmt::Display`] writes them).
    pub fn audit_name(&self) -> String {
        match self {
            Object::WorkerGroup(name) => format!("worker-group {name}"),
            Object::Route(kind) => format!("kind-route {kind}"),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::WorkerGroup(name) => write!(f, "worker group {name}"),
            Object::Route(kind) => write!(f, "route {kind}"),
            Object::Calendar(name) => write!(f, "calendar {name}"),
            Object::Job(group, name) => write!(f, "job {group}.{name}"),
            Object::Trigger(group, name) => write!(f, "trigger {group}.{name}"),
            Object::Dependency((g, n), (ug, un)) => write!(f, "dependency {g}.{n} on {ug}.{un}"),
        }
    }
}

/// One object's change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ObjectChange {
    /// What it does.
    pub action: Action,
    /// The object: `job reports.日报`, `trigger default.nightly`, `dependency reports.日报 on
    /// ingest.raw`, `calendar holidays`, `worker group etl`, `route hive`.
    pub object: String,
    /// For an update, each changed setting, before and after; for a create, every setting.
    pub fields: Vec<Change>,
    /// The object by its names, for the apply that makes the change.
    #[serde(skip)]
    pub target: Option<Object>,
}

/// Every change, creates and updates first (in the order they can be made: groups, routes,
/// calendars, jobs, triggers, dependencies), then deletes (the other way round).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Plan {
    /// The changes, in the order they are made.
    pub changes: Vec<ObjectChange>,
}

impl Plan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// What the plan knows of the store beyond its definitions: which objects the applying source
/// made, and what its files said of its triggers' pauses at its last apply.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The source applying; None plans without taking objects over.
    pub source: Option<String>,
    /// The objects made by hand: one the files hold is taken over by the source applying
    /// (a `source` change), so that its next applies and prunes treat it as theirs.
    pub made_by_hand: BTreeSet<Object>,
    /// The objects that may be deleted when the files no longer hold them: the apply's own
    /// source's, when it prunes; none otherwise.
    pub prunable: BTreeSet<Object>,
    /// For each trigger of the applying source, the `paused` its files said at the last apply.
    pub applied_paused: BTreeMap<Object, bool>,
}

/// The plan from `current` (the store's definitions, as `export` reads them) to `desired` (the
/// files'), within `scope`. Jobs resolve their worker groups by the files' routes over the
/// store's.
pub fn plan(current: &Definitions, desired: &Definitions, scope: &Scope) -> Plan {
    // A route this plan deletes no longer sends a job anywhere.
    let kept = |kind: &str| {
        !scope.prunable.contains(&Object::Route(kind.to_string()))
            || desired.routes.iter().any(|r| r.kind == kind)
    };
    let mut routes: BTreeMap<&str, &str> = current
        .routes
        .iter()
        .filter(|r| kept(&r.kind))
        .map(|r| (r.kind.as_str(), r.worker_group.as_str()))
        .collect();
    routes.extend(
        desired
            .routes
            .iter()
            .map(|r| (r.kind.as_str(), r.worker_group.as_str())),
    );
    let jobs: BTreeSet<(String, String)> = current
        .jobs
        .iter()
        .chain(&desired.jobs)
        .map(|j| (j.group().to_string(), j.name.clone()))
        .collect();

    type Section = BTreeMap<Object, Value>;
    let mut sections: Vec<(Section, Section)> = Vec::new();
    let group = |g: &crate::store::worker_groups::NewWorkerGroup| {
        (
            Object::WorkerGroup(g.name.clone()),
            json(&g.description, "description"),
        )
    };
    sections.push((
        current.worker_groups.iter().map(group).collect(),
        desired.worker_groups.iter().map(group).collect(),
    ));
    let route = |r: &crate::store::kind_routes::KindRoute| {
        (
            Object::Route(r.kind.clone()),
            json(&r.worker_group, "worker_group"),
        )
    };
    sections.push((
        current.routes.iter().map(route).collect(),
        desired.routes.iter().map(route).collect(),
    ));
    let calendar = |c: &crate::store::calendars::NamedCalendar| {
        (
            Object::Calendar(c.name.clone()),
            serde_json::json!({"description": c.description, "definition": c.definition}),
        )
    };
    sections.push((
        current.calendars.iter().map(calendar).collect(),
        desired.calendars.iter().map(calendar).collect(),
    ));
    let job = |j: &JobDefinition| {
        let mut job = j.clone().normalized();
        if job.worker_group.is_none() {
            let routed = routes.get(job.kind.as_str()).copied().unwrap_or("default");
            job.worker_group = Some(routed.to_string());
        }
        job.triggers.clear();
        job.depends_on.clear();
        (
            Object::Job(j.group().to_string(), j.name.clone()),
            settings(&job),
        )
    };
    sections.push((
        current.jobs.iter().map(job).collect(),
        desired.jobs.iter().map(job).collect(),
    ));
    let current_triggers: BTreeMap<Object, &TriggerDefinition> = current
        .jobs
        .iter()
        .flat_map(|j| &j.triggers)
        .map(|t| (trigger_object(t), t))
        .collect();
    let trigger =
        |j: &JobDefinition, t: &TriggerDefinition, against: Option<&TriggerDefinition>| {
            let mut t = t.clone().normalized();
            t.paused = None;
            if let Some(had) = against.and_then(|c| c.schedule.start_time())
                && t.schedule.start_time().is_none()
            {
                t.schedule = t.schedule.anchored_at(had);
            }
            let mut value = settings(&t);
            if let Some(fields) = value.as_object_mut() {
                fields.insert("job".into(), Value::String(j.dotted()));
            }
            (trigger_object(&t), value)
        };
    sections.push((
        current
            .jobs
            .iter()
            .flat_map(|j| j.triggers.iter().map(move |t| (j, t)))
            .map(|(j, t)| trigger(j, t, None))
            .collect(),
        desired
            .jobs
            .iter()
            .flat_map(|j| j.triggers.iter().map(move |t| (j, t)))
            .map(|(j, t)| trigger(j, t, current_triggers.get(&trigger_object(t)).copied()))
            .collect(),
    ));
    let dependency = |j: &JobDefinition, d: &DependencyDefinition| {
        let upstream = resolve_job(&d.job, &jobs).unwrap_or_else(|| unresolved(&d.job));
        let normalized = d.clone().normalized();
        (
            Object::Dependency((j.group().to_string(), j.name.clone()), upstream),
            serde_json::json!({
                "window": normalized.window,
                "on_upstream_failure": normalized.on_upstream_failure,
            }),
        )
    };
    sections.push((
        current
            .jobs
            .iter()
            .flat_map(|j| j.depends_on.iter().map(move |d| (j, d)))
            .map(|(j, d)| dependency(j, d))
            .collect(),
        desired
            .jobs
            .iter()
            .flat_map(|j| j.depends_on.iter().map(move |d| (j, d)))
            .map(|(j, d)| dependency(j, d))
            .collect(),
    ));
    let desired_paused: BTreeMap<Object, bool> = desired
        .jobs
        .iter()
        .flat_map(|j| &j.triggers)
        .map(|t| (trigger_object(t), t.paused.unwrap_or(false)))
        .collect();

    let mut plan = Plan::default();
    let mut deletes = Vec::new();
    for (now, wanted) in &sections {
        for (object, value) in wanted {
            let mut fields = match now.get(object) {
                None => changes(&Value::Null, value),
                Some(had) => changes(had, value),
            };
            let is_new = !now.contains_key(object);
            if !is_new
                && let Some(source) = &scope.source
                && scope.made_by_hand.contains(object)
            {
                fields.push(Change {
                    field: "source".into(),
                    before: Value::Null,
                    after: Value::String(source.clone()),
                });
            }
            if let Some(&paused) = desired_paused.get(object) {
                let was = current_triggers
                    .get(object)
                    .is_some_and(|t| t.paused == Some(true));
                let changed_in_files = scope
                    .applied_paused
                    .get(object)
                    .is_some_and(|&last| last != paused);
                if (is_new && paused) || (!is_new && changed_in_files && was != paused) {
                    fields.push(Change {
                        field: "paused".into(),
                        before: if is_new {
                            Value::Null
                        } else {
                            Value::Bool(was)
                        },
                        after: Value::Bool(paused),
                    });
                }
            }
            if is_new || !fields.is_empty() {
                plan.changes.push(ObjectChange {
                    action: if is_new {
                        Action::Create
                    } else {
                        Action::Update
                    },
                    object: object.to_string(),
                    fields,
                    target: Some(object.clone()),
                });
            }
        }
        let gone: Vec<ObjectChange> = now
            .iter()
            .filter(|(object, _)| !wanted.contains_key(*object) && scope.prunable.contains(*object))
            .map(|(object, had)| ObjectChange {
                action: Action::Delete,
                object: object.to_string(),
                fields: changes(had, &Value::Null),
                target: Some(object.clone()),
            })
            .collect();
        deletes.push(gone);
    }
    for section in deletes.into_iter().rev() {
        plan.changes.extend(section);
    }
    plan
}

/// A `group.name` no job answers to, read as group and name at its first dot (a name without
/// one is in the default group), as the plan shows it.
fn unresolved(reference: &str) -> (String, String) {
    match reference.split_once('.') {
        Some((group, name)) => (group.to_string(), name.to_string()),
        None => ("default".to_string(), reference.to_string()),
    }
}

/// The first dependency in `desired` whose upstream is a job neither `desired` nor `current`
/// holds (or one the plan deletes), as an error naming it: the plan would fail there, so it is
/// refused before.
pub fn missing_upstream(
    current: &Definitions,
    desired: &Definitions,
    scope: &Scope,
) -> Option<String> {
    // A job this plan deletes is no upstream.
    let jobs: BTreeSet<(String, String)> = current
        .jobs
        .iter()
        .map(|j| (j.group().to_string(), j.name.clone()))
        .filter(|(g, n)| !scope.prunable.contains(&Object::Job(g.clone(), n.clone())))
        .chain(
            desired
                .jobs
                .iter()
                .map(|j| (j.group().to_string(), j.name.clone())),
        )
        .collect();
    desired.jobs.iter().find_map(|j| {
        j.depends_on.iter().find_map(|d| {
            if resolve_job(&d.job, &jobs).is_some() {
                return None;
            }
            let (group, name) = unresolved(&d.job);
            let object = Object::Dependency((j.group().to_string(), j.name.clone()), (group, name));
            Some(format!(
                "{object}: no job {:?} in the files or the store (name it as group.name, or by \
                 its name in the default group)",
                d.job
            ))
        })
    })
}

fn json<T: Serialize>(value: &T, field: &str) -> Value {
    let mut object = serde_json::Map::new();
    object.insert(
        field.to_string(),
        serde_json::to_value(value).unwrap_or(Value::Null),
    );
    Value::Object(object)
}

fn settings<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn trigger_object(t: &TriggerDefinition) -> Object {
    Object::Trigger(t.group().to_string(), t.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::read::read_text;

    fn definitions(text: &str) -> Definitions {
        match read_text(std::path::Path::new("t.yaml"), text) {
            Ok(loaded) => loaded.definitions(),
            Err(problems) => panic!("{problems:?}"),
        }
    }

    const STORE: &str = r#"
jobs:
  - name: 日报
    group: reports
    kind: shell
    spec: {command: [./report.sh]}
    worker_group: default
    triggers:
      - name: nightly
        schedule: {kind: cron, cron: "0 0 2 * * ?", time_zone: Asia/Shanghai}
  - name: old
    kind: noop
    worker_group: default
"#;

    #[test]
    fn defaults_spelled_out_change_nothing() {
        let current = definitions(STORE);
        let desired = definitions(
            &STORE
                .replace(
                    "    worker_group: default\n    triggers:",
                    "    priority: 5\n    concurrent: true\n    triggers:",
                )
                .replace(
                    "Asia/Shanghai}",
                    "Asia/Shanghai}\n        misfire_policy: smart\n        paused: true",
                ),
        );
        let plan = plan(&current, &desired, &Scope::default());
        assert!(plan.is_empty(), "{plan:#?}");
    }

    #[test]
    fn a_changed_cron_is_an_update_naming_the_field() {
        let current = definitions(STORE);
        let desired = definitions(&STORE.replace("0 0 2 * * ?", "0 30 3 * * ?"));
        let plan = plan(&current, &desired, &Scope::default());
        assert_eq!(plan.changes.len(), 1, "{plan:#?}");
        let change = &plan.changes[0];
        assert_eq!(
            (change.action, change.object.as_str()),
            (Action::Update, "trigger default.nightly")
        );
        assert_eq!(change.fields.len(), 1, "{change:#?}");
        assert_eq!(change.fields[0].field, "schedule");
        assert_eq!(change.fields[0].before["cron"], "0 0 2 * * ?");
        assert_eq!(change.fields[0].after["cron"], "0 30 3 * * ?");
    }

    #[test]
    fn only_prunable_objects_the_files_left_are_deleted() {
        let current = definitions(STORE);
        let desired = definitions(&STORE.replace(
            "  - name: old\n    kind: noop\n    worker_group: default\n",
            "",
        ));
        assert!(plan(&current, &desired, &Scope::default()).is_empty());
        let scope = Scope {
            prunable: [Object::Job("default".into(), "old".into())].into(),
            ..Scope::default()
        };
        let plan = plan(&current, &desired, &scope);
        assert_eq!(plan.changes.len(), 1, "{plan:#?}");
        assert_eq!(plan.changes[0].action, Action::Delete);
        assert_eq!(plan.changes[0].object, "job default.old");
    }

    #[test]
    fn new_objects_come_in_the_order_they_can_be_made() {
        let desired = definitions(&format!(
            "{STORE}calendars:\n  - name: c\n    definition: {{kind: weekly, excluded_days: [SAT]}}\n"
        ));
        let plan = plan(&Definitions::default(), &desired, &Scope::default());
        let objects: Vec<&str> = plan.changes.iter().map(|c| c.object.as_str()).collect();
        assert_eq!(
            objects,
            [
                "calendar c",
                "job default.old",
                "job reports.日报",
                "trigger default.nightly"
            ]
        );
    }

    #[test]
    fn a_files_pause_applies_only_when_it_changed_in_the_files() {
        let nightly = Object::Trigger("default".into(), "nightly".into());
        let paused_in_store =
            STORE.replace("Asia/Shanghai}", "Asia/Shanghai}\n        paused: true");
        let current = definitions(&paused_in_store);
        // The operator paused it; the files still say running, as at the last apply.
        let scope = Scope {
            applied_paused: [(nightly.clone(), false)].into(),
            ..Scope::default()
        };
        assert!(plan(&current, &definitions(STORE), &scope).is_empty());
        // The files say paused now, the last apply said running: it was paused in the files,
        // and already is.
        assert!(plan(&current, &definitions(&paused_in_store), &scope).is_empty());
        // Resumed in the files since the last apply: the resume is applied.
        let scope = Scope {
            applied_paused: [(nightly.clone(), true)].into(),
            ..Scope::default()
        };
        let plan = plan(&current, &definitions(STORE), &scope);
        assert_eq!(plan.changes.len(), 1, "{plan:#?}");
        assert_eq!(plan.changes[0].target, Some(nightly));
        assert_eq!(plan.changes[0].fields[0].field, "paused");
        assert_eq!(plan.changes[0].fields[0].after, Value::Bool(false));
    }

    #[test]
    fn what_was_made_by_hand_is_taken_over_by_the_source_applying() {
        let current = definitions(STORE);
        let old = Object::Job("default".into(), "old".into());
        let scope = Scope {
            source: Some("chime".into()),
            made_by_hand: [old.clone()].into(),
            ..Scope::default()
        };
        let plan = plan(&current, &current, &scope);
        assert_eq!(plan.changes.len(), 1, "{plan:#?}");
        assert_eq!(plan.changes[0].target, Some(old));
        assert_eq!(plan.changes[0].fields[0].field, "source");
        assert_eq!(
            plan.changes[0].fields[0].after,
            Value::String("chime".into())
        );
    }

    #[test]
    fn a_name_with_dots_is_read_every_way() {
        assert_eq!(
            Object::parse("job com.acme.report"),
            [
                Object::Job("com".into(), "acme.report".into()),
                Object::Job("com.acme".into(), "report".into())
            ]
        );
        assert_eq!(
            Object::parse("dependency a.b on c.d"),
            [Object::Dependency(
                ("a".into(), "b".into()),
                ("c".into(), "d".into())
            )]
        );
    }
}
