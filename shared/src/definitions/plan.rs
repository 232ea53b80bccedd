//! The plan between what the store holds and what the files say: each object to create, each to
//! update with its changed fields (before → after), and, when pruning, each of the same source
//! to delete. Objects are compared as the store would hold them: a setting the file leaves out
//! and one it sets to the API's default are the same, and a job without a worker group goes
//! where its kind's route sends it.
//!
//! A trigger's `paused` is not a setting the plan compares: pausing and resuming stay operator
//! actions (see `format.rs`).

use std::collections::{BTreeMap, BTreeSet};

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

/// One object's change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ObjectChange {
    /// What it does.
    pub action: Action,
    /// The object, as the audit trail names it: `job reports.日报`, `trigger default.nightly`,
    /// `dependency reports.日报 on ingest.raw`, `calendar holidays`, `worker group etl`,
    /// `route hive`.
    pub object: String,
    /// For an update, each changed setting, before and after; for a create, every setting.
    pub fields: Vec<Change>,
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

/// The plan from `current` (the store's definitions, as `export` reads them) to `desired` (the
/// files'). `prunable` names the objects (as [`ObjectChange::object`] does) that may be deleted
/// when the files no longer hold them: those of the apply's own source; none when not pruning.
/// `routes` are the routes the jobs resolve their worker groups by (the files', over the
/// store's).
pub fn plan(current: &Definitions, desired: &Definitions, prunable: &BTreeSet<String>) -> Plan {
    let mut routes: BTreeMap<&str, &str> = current
        .routes
        .iter()
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

    let mut sections: Vec<(BTreeMap<String, Value>, BTreeMap<String, Value>)> = Vec::new();
    let by = |items: Vec<(String, Value)>| items.into_iter().collect::<BTreeMap<_, _>>();
    let group = |g: &crate::store::worker_groups::NewWorkerGroup| {
        (
            format!("worker group {}", g.name),
            json(&g.description, "description"),
        )
    };
    sections.push((
        by(current.worker_groups.iter().map(group).collect()),
        by(desired.worker_groups.iter().map(group).collect()),
    ));
    let route = |r: &crate::store::kind_routes::KindRoute| {
        (
            format!("route {}", r.kind),
            json(&r.worker_group, "worker_group"),
        )
    };
    sections.push((
        by(current.routes.iter().map(route).collect()),
        by(desired.routes.iter().map(route).collect()),
    ));
    let calendar = |c: &crate::store::calendars::NamedCalendar| {
        (
            format!("calendar {}", c.name),
            serde_json::json!({"description": c.description, "definition": c.definition}),
        )
    };
    sections.push((
        by(current.calendars.iter().map(calendar).collect()),
        by(desired.calendars.iter().map(calendar).collect()),
    ));
    let job = |j: &JobDefinition| {
        let mut job = j.clone().normalized();
        if job.worker_group.is_none() {
            let routed = routes.get(job.kind.as_str()).copied().unwrap_or("default");
            job.worker_group = Some(routed.to_string());
        }
        job.triggers.clear();
        job.depends_on.clear();
        (format!("job {}", j.dotted()), settings(&job))
    };
    sections.push((
        by(current.jobs.iter().map(job).collect()),
        by(desired.jobs.iter().map(job).collect()),
    ));
    let current_triggers: BTreeMap<String, &TriggerDefinition> = current
        .jobs
        .iter()
        .flat_map(|j| &j.triggers)
        .map(|t| (trigger_name(t), t))
        .collect();
    let trigger =
        |j: &JobDefinition, t: &TriggerDefinition, against: Option<&TriggerDefinition>| {
            let mut t = t.clone().normalized();
            t.paused = None;
            // A file that gives an interval no start keeps the start the trigger has.
            if let Some(had) = against.and_then(|c| c.schedule.start_time())
                && t.schedule.start_time().is_none()
            {
                t.schedule = t.schedule.anchored_at(had);
            }
            let mut value = settings(&t);
            if let Some(fields) = value.as_object_mut() {
                fields.insert("job".into(), Value::String(j.dotted()));
            }
            (format!("trigger {}", trigger_name(&t)), value)
        };
    sections.push((
        by(current
            .jobs
            .iter()
            .flat_map(|j| j.triggers.iter().map(move |t| (j, t)))
            .map(|(j, t)| trigger(j, t, None))
            .collect()),
        by(desired
            .jobs
            .iter()
            .flat_map(|j| j.triggers.iter().map(move |t| (j, t)))
            .map(|(j, t)| trigger(j, t, current_triggers.get(&trigger_name(t)).copied()))
            .collect()),
    ));
    let dependency = |j: &JobDefinition, d: &DependencyDefinition| {
        let upstream = resolve_job(&d.job, &jobs)
            .map(|(g, n)| format!("{g}.{n}"))
            .unwrap_or_else(|| d.job.clone());
        let normalized = d.clone().normalized();
        (
            format!("dependency {} on {upstream}", j.dotted()),
            serde_json::json!({
                "window": normalized.window,
                "on_upstream_failure": normalized.on_upstream_failure,
            }),
        )
    };
    sections.push((
        by(current
            .jobs
            .iter()
            .flat_map(|j| j.depends_on.iter().map(move |d| (j, d)))
            .map(|(j, d)| dependency(j, d))
            .collect()),
        by(desired
            .jobs
            .iter()
            .flat_map(|j| j.depends_on.iter().map(move |d| (j, d)))
            .map(|(j, d)| dependency(j, d))
            .collect()),
    ));

    let mut plan = Plan::default();
    let mut deletes = Vec::new();
    for (now, wanted) in &sections {
        for (object, value) in wanted {
            match now.get(object) {
                None => plan.changes.push(ObjectChange {
                    action: Action::Create,
                    object: object.clone(),
                    fields: changes(&Value::Null, value),
                }),
                Some(had) if had != value => plan.changes.push(ObjectChange {
                    action: Action::Update,
                    object: object.clone(),
                    fields: changes(had, value),
                }),
                Some(_) => {}
            }
        }
        let mut gone: Vec<ObjectChange> = now
            .iter()
            .filter(|(object, _)| !wanted.contains_key(*object) && prunable.contains(*object))
            .map(|(object, had)| ObjectChange {
                action: Action::Delete,
                object: object.clone(),
                fields: changes(had, &Value::Null),
            })
            .collect();
        deletes.push(std::mem::take(&mut gone));
    }
    // Deletes the other way round: a dependency before its job, a job before its calendar.
    for section in deletes.into_iter().rev() {
        plan.changes.extend(section);
    }
    plan
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

fn trigger_name(t: &TriggerDefinition) -> String {
    format!("{}.{}", t.group(), t.name)
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
        let plan = plan(&current, &desired, &BTreeSet::new());
        assert!(plan.is_empty(), "{plan:#?}");
    }

    #[test]
    fn a_changed_cron_is_an_update_naming_the_field() {
        let current = definitions(STORE);
        let desired = definitions(&STORE.replace("0 0 2 * * ?", "0 30 3 * * ?"));
        let plan = plan(&current, &desired, &BTreeSet::new());
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
        assert!(plan(&current, &desired, &BTreeSet::new()).is_empty());
        let prunable: BTreeSet<String> = ["job default.old".to_string()].into_iter().collect();
        let plan = plan(&current, &desired, &prunable);
        assert_eq!(plan.changes.len(), 1, "{plan:#?}");
        assert_eq!(plan.changes[0].action, Action::Delete);
        assert_eq!(plan.changes[0].object, "job default.old");
    }

    #[test]
    fn new_objects_come_in_the_order_they_can_be_made() {
        let desired = definitions(&format!(
            "{STORE}calendars:\n  - name: c\n    definition: {{kind: weekly, excluded_days: [SAT]}}\n"
        ));
        let plan = plan(&Definitions::default(), &desired, &BTreeSet::new());
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
}
