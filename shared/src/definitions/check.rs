//! Checking definitions with no server: everything the API would refuse that the files alone
//! can show (names, a job's fields and its kind's spec, cron text and zones, calendars and the
//! calendars triggers name, misfire policies, references between jobs, dependency cycles,
//! duplicates across files), each at its `file:line:column`. What only the store can tell (a
//! kind a live worker offers, a group a worker declared) is a warning, not an error.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;

use super::read::{Loaded, Problem, Step};
use crate::config::is_valid_name;
use crate::model::kinds::BUILTIN_KINDS;
use crate::schedule::{Calendar, Schedule};
use crate::store::StoreError;

/// What checking found.
#[derive(Debug, Default)]
pub struct Report {
    /// What the API would refuse: nothing may be applied while there is one.
    pub errors: Vec<Problem>,
    /// What may be right but the files alone cannot show.
    pub warnings: Vec<Problem>,
}

/// Where an object of the definitions is: its document and its path there.
type At = (usize, Vec<Step>);

/// A job by (group, name).
type JobKey = (String, String);

/// A dependency: the downstream job, its upstream, and where it is written.
type Edge = (JobKey, JobKey, At);

/// Checks `loaded` as the API would, with `now` as the schedules' start.
pub fn check(loaded: &Loaded, now: Timestamp) -> Report {
    let mut checker = Checker {
        loaded,
        report: Report::default(),
    };
    checker.run(now);
    checker.report
}

/// The job `reference` names (`group.name`, or a name in the default group) among `jobs`
/// (`group` → names): the split at the first dot that names a job, else the whole text as a
/// name in the default group. Names may hold dots, so every split is tried.
pub fn resolve_job(reference: &str, jobs: &BTreeSet<(String, String)>) -> Option<(String, String)> {
    let candidates = reference
        .match_indices('.')
        .map(|(i, _)| (&reference[..i], &reference[i + 1..]))
        .chain(std::iter::once(("default", reference)));
    for (group, name) in candidates {
        let key = (group.to_string(), name.to_string());
        if jobs.contains(&key) {
            return Some(key);
        }
    }
    None
}

struct Checker<'a> {
    loaded: &'a Loaded,
    report: Report,
}

fn key(name: &'static str) -> Step {
    Step::Key(name)
}

impl Checker<'_> {
    fn error(&mut self, (document, path): &At, message: String) {
        let problem = self.loaded.problem(*document, path, message);
        self.report.errors.push(problem);
    }

    fn warning(&mut self, (document, path): &At, message: String) {
        let problem = self.loaded.problem(*document, path, message);
        self.report.warnings.push(problem);
    }

    /// Where `first` was, for a "named twice" message.
    fn place(&self, (document, path): &At) -> String {
        let problem = self.loaded.problem(*document, path, String::new());
        format!(
            "{}:{}",
            problem.file.display(),
            if problem.line == 0 {
                "?".to_string()
            } else {
                problem.line.to_string()
            }
        )
    }

    /// Records `name` of `what` at `at`; reports it when `seen` already holds it.
    fn once<K: Ord + Clone>(
        &mut self,
        seen: &mut BTreeMap<K, At>,
        name: K,
        shown: &str,
        what: &str,
        at: At,
    ) {
        if let Some(first) = seen.get(&name) {
            let first = self.place(first);
            self.error(
                &at,
                format!("{what} {shown} is defined twice (first at {first})"),
            );
        } else {
            seen.insert(name, at);
        }
    }

    fn run(&mut self, now: Timestamp) {
        let loaded = self.loaded;
        let all = loaded.definitions();
        let declared: BTreeSet<&str> = all
            .worker_groups
            .iter()
            .map(|g| g.name.as_str())
            .chain(std::iter::once("default"))
            .collect();
        let routed: BTreeSet<&str> = all.routes.iter().map(|r| r.kind.as_str()).collect();
        let calendars: HashMap<&str, &crate::schedule::CalendarSpec> = all
            .calendars
            .iter()
            .map(|c| (c.name.as_str(), &c.definition))
            .collect();
        let jobs: BTreeSet<(String, String)> = all
            .jobs
            .iter()
            .map(|j| (j.group().to_string(), j.name.clone()))
            .collect();

        let mut groups_seen = BTreeMap::new();
        let mut routes_seen = BTreeMap::new();
        let mut calendars_seen = BTreeMap::new();
        let mut jobs_seen = BTreeMap::new();
        let mut triggers_seen = BTreeMap::new();
        // Dependencies as (downstream, upstream) with where each is, for the cycle check.
        let mut edges: Vec<Edge> = Vec::new();

        for (d, document) in loaded.documents.iter().enumerate() {
            let defs = &document.definitions;
            for (i, group) in defs.worker_groups.iter().enumerate() {
                let at = (d, vec![key("worker_groups"), Step::Index(i), key("name")]);
                if !is_valid_name(&group.name) {
                    self.error(
                        &at,
                        format!(
                            "worker group {:?}: use 1-100 letters, digits, '-', '_' or '.'",
                            group.name
                        ),
                    );
                }
                if let Err(e) = crate::model::check_text("description", &group.description) {
                    let mut path = at.1.clone();
                    path.pop();
                    path.push(key("description"));
                    self.error(&(d, path), e.to_string());
                }
                let name = group.name.clone();
                self.once(&mut groups_seen, name, &group.name, "worker group", at);
            }
            for (i, route) in defs.routes.iter().enumerate() {
                let at = (d, vec![key("routes"), Step::Index(i)]);
                for (field, value) in [("kind", &route.kind), ("worker_group", &route.worker_group)]
                {
                    if !is_valid_name(value) {
                        let mut path = at.1.clone();
                        path.push(key(field));
                        self.error(
                            &(d, path),
                            format!(
                                "{field} {value:?}: use 1-100 letters, digits, '-', '_' or '.'"
                            ),
                        );
                    }
                }
                if !declared.contains(route.worker_group.as_str()) {
                    let mut path = at.1.clone();
                    path.push(key("worker_group"));
                    self.warning(
                        &(d, path),
                        format!(
                            "worker group {:?} is not declared in these files (worker_groups): it \
                             must exist on the server",
                            route.worker_group
                        ),
                    );
                }
                let kind = route.kind.clone();
                self.once(&mut routes_seen, kind, &route.kind, "the route of kind", at);
            }
            for (i, calendar) in defs.calendars.iter().enumerate() {
                let at = (d, vec![key("calendars"), Step::Index(i)]);
                if let Err(e) = crate::model::check_name("calendar name", &calendar.name) {
                    let mut path = at.1.clone();
                    path.push(key("name"));
                    self.error(&(d, path), e);
                }
                if let Err(e) = crate::model::check_text("description", &calendar.description) {
                    let mut path = at.1.clone();
                    path.push(key("description"));
                    self.error(&(d, path), e.to_string());
                }
                if let Err(e) = Calendar::compile(&calendar.definition) {
                    let mut path = at.1.clone();
                    path.push(key("definition"));
                    self.error(&(d, path), format!("calendar {}: {e}", calendar.name));
                }
                let name = calendar.name.clone();
                self.once(&mut calendars_seen, name, &calendar.name, "calendar", at);
            }
            for (i, job) in defs.jobs.iter().enumerate() {
                let at = (d, vec![key("jobs"), Step::Index(i)]);
                let dotted = job.dotted();
                if let Err(e) = job.new_job().validate() {
                    let message = match e {
                        StoreError::Invalid(m) => m,
                        other => other.to_string(),
                    };
                    self.error(&at, format!("job {dotted}: {message}"));
                }
                if !BUILTIN_KINDS.contains(&job.kind.as_str())
                    && !routed.contains(job.kind.as_str())
                {
                    let mut path = at.1.clone();
                    path.push(key("kind"));
                    self.warning(
                        &(d, path),
                        format!(
                            "job {dotted}: kind {:?} is not built in (shell, http, noop) and no \
                             route in these files sends it to a group: a live worker must offer \
                             it as a command template",
                            job.kind
                        ),
                    );
                }
                if let Some(group) = &job.worker_group
                    && !declared.contains(group.as_str())
                {
                    let mut path = at.1.clone();
                    path.push(key("worker_group"));
                    self.warning(
                        &(d, path),
                        format!(
                            "job {dotted}: worker group {group:?} is not declared in these files \
                             (worker_groups): it must exist on the server"
                        ),
                    );
                }
                let name = (job.group().to_string(), job.name.clone());
                self.once(&mut jobs_seen, name, &dotted, "job", at.clone());

                for (k, trigger) in job.triggers.iter().enumerate() {
                    let mut tat = at.clone();
                    tat.1.extend([key("triggers"), Step::Index(k)]);
                    let field = |name: &'static str| {
                        let mut path = tat.1.clone();
                        path.push(key(name));
                        (d, path)
                    };
                    let shown = format!("{}.{}", trigger.group(), trigger.name);
                    for (what, name, f) in [
                        ("trigger group", trigger.group(), "group"),
                        ("trigger name", trigger.name.as_str(), "name"),
                    ] {
                        if let Err(e) = crate::model::check_name(what, name) {
                            self.error(&field(f), e);
                        }
                    }
                    let calendar = match &trigger.calendar {
                        Some(name) => match calendars.get(name.as_str()) {
                            Some(spec) => Calendar::compile(spec).ok(),
                            None => {
                                self.error(
                                    &field("calendar"),
                                    format!(
                                        "trigger {shown}: calendar {name:?} is not defined in \
                                         these files (calendars)"
                                    ),
                                );
                                None
                            }
                        },
                        None => None,
                    };
                    match Schedule::compile(&trigger.schedule, now) {
                        Err(e) => {
                            let mut path = field("schedule");
                            if let Some(part) = schedule_field(&e.to_string()) {
                                path.1.push(key(part));
                            }
                            self.error(&path, format!("trigger {shown}: {e}"));
                        }
                        Ok(schedule) => {
                            let policy = trigger.misfire_policy.unwrap_or_default();
                            if let Err(e) = policy.check(&schedule) {
                                self.error(
                                    &field("misfire_policy"),
                                    format!("trigger {shown}: {e}"),
                                );
                            }
                            if (trigger.calendar.is_none() || calendar.is_some())
                                && schedule.first_fire_time(calendar.as_ref()).is_none()
                            {
                                self.error(
                                    &field("schedule"),
                                    format!(
                                        "trigger {shown}: the schedule (with its calendar) will \
                                         never fire from now on"
                                    ),
                                );
                            }
                        }
                    }
                    if let Some(description) = &trigger.description
                        && let Err(e) = crate::model::check_text("description", description)
                    {
                        self.error(&field("description"), e.to_string());
                    }
                    if let Err(e) = crate::model::check_json("data", &trigger.data) {
                        self.error(&field("data"), e.to_string());
                    }
                    let name = (trigger.group().to_string(), trigger.name.clone());
                    self.once(&mut triggers_seen, name, &shown, "trigger", tat.clone());
                }

                for (k, dependency) in job.depends_on.iter().enumerate() {
                    let mut dat = at.clone();
                    dat.1
                        .extend([key("depends_on"), Step::Index(k), key("job")]);
                    match resolve_job(&dependency.job, &jobs) {
                        // An export of some job groups depends on jobs of others.
                        None => self.warning(
                            &dat,
                            format!(
                                "job {dotted} depends on {:?}, which these files do not define: \
                                 it must exist on the server (name it as group.name, or by its \
                                 name in the default group)",
                                dependency.job
                            ),
                        ),
                        Some(upstream)
                            if upstream == (job.group().to_string(), job.name.clone()) =>
                        {
                            self.error(&dat, format!("job {dotted} depends on itself"))
                        }
                        Some(upstream) => {
                            edges.push(((job.group().to_string(), job.name.clone()), upstream, dat))
                        }
                    }
                }
            }
        }
        self.cycles(&edges);
    }

    /// Reports each dependency that closes a cycle, with the cycle.
    fn cycles(&mut self, edges: &[Edge]) {
        let mut upstreams: BTreeMap<&(String, String), Vec<&(String, String)>> = BTreeMap::new();
        for (down, up, _) in edges {
            upstreams.entry(down).or_default().push(up);
        }
        let mut reported: BTreeSet<Vec<&(String, String)>> = BTreeSet::new();
        for (down, up, at) in edges {
            // A path from `up` back to `down` through the upstreams closes a cycle with this edge.
            let mut stack = vec![vec![up]];
            let mut visited = BTreeSet::new();
            while let Some(path) = stack.pop() {
                let Some(last) = path.last().copied() else {
                    continue;
                };
                if last == down {
                    // Every edge of a cycle closes it: say each cycle once.
                    let mut members: Vec<&(String, String)> = path.clone();
                    members.sort();
                    if !reported.insert(members) {
                        break;
                    }
                    let names: Vec<String> = std::iter::once(down)
                        .chain(path.iter().copied())
                        .map(|(g, n)| format!("{g}.{n}"))
                        .collect();
                    self.error(
                        at,
                        format!(
                            "a dependency cycle: {} (each waits for the next)",
                            names.join(" → ")
                        ),
                    );
                    break;
                }
                if !visited.insert(last) {
                    continue;
                }
                for next in upstreams.get(last).into_iter().flatten() {
                    let mut longer = path.clone();
                    longer.push(next);
                    stack.push(longer);
                }
            }
        }
    }
}

/// The field of a schedule a compile error is about, when its message names one.
fn schedule_field(message: &str) -> Option<&'static str> {
    [
        "cron",
        "time_zone",
        "interval_ms",
        "interval",
        "start_time",
        "end_time",
    ]
    .into_iter()
    .find(|field| message.contains(field))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::definitions::read::read_text;

    const GOOD: &str = r#"
worker_groups:
  - name: etl
calendars:
  - name: 节假日
    definition: {kind: annual, excluded_days: ["12-25"]}
jobs:
  - name: 日报
    group: reports
    kind: shell
    spec: {command: [./report.sh]}
    worker_group: etl
    data_time_period: day
    triggers:
      - name: nightly
        schedule: {kind: cron, cron: "0 0 2 * * ?", time_zone: Asia/Shanghai}
        calendar: 节假日
    depends_on:
      - job: ingest.raw
  - name: raw
    group: ingest
    kind: noop
    triggers:
      - name: often
        schedule: {kind: simple, interval_ms: 90000, repeat_count: -1}
"#;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn errors(text: &str) -> Vec<String> {
        match read_text(Path::new("jobs.yaml"), text) {
            Err(problems) => problems.iter().map(ToString::to_string).collect(),
            Ok(loaded) => check(&loaded, now())
                .errors
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }

    #[test]
    fn good_definitions_have_no_errors() {
        assert_eq!(errors(GOOD), Vec::<String>::new());
    }

    #[test]
    fn a_bad_cron_is_named_at_its_line() {
        let bad = GOOD.replace("0 0 2 * * ?", "0 0 25 * * ?");
        let found = errors(&bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("jobs.yaml:16:"), "{found:?}");
        assert!(
            found[0].contains("reports") || found[0].contains("nightly"),
            "{found:?}"
        );
    }

    #[test]
    fn an_unknown_field_is_refused_with_its_name_and_line() {
        let bad = GOOD.replace("    worker_group: etl\n", "    worker_grup: etl\n");
        let found = errors(&bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("jobs.yaml:12:"), "{found:?}");
        assert!(found[0].contains("worker_grup"), "{found:?}");
    }

    #[test]
    fn a_syntax_error_is_located() {
        let found = errors("jobs:\n  - name: [unclosed\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("jobs.yaml:"), "{found:?}");
        assert!(!found[0].starts_with("jobs.yaml: "), "a line: {found:?}");
    }

    #[test]
    fn a_job_defined_twice_names_both_places() {
        let twice = format!("{GOOD}---\njobs:\n  - name: raw\n    group: ingest\n    kind: noop\n");
        let found = errors(&twice);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("defined twice (first at jobs.yaml:"),
            "{found:?}"
        );
    }

    #[test]
    fn a_cycle_is_reported_once() {
        let cycle = GOOD.replace(
            "        schedule: {kind: simple, interval_ms: 90000, repeat_count: -1}\n",
            "        schedule: {kind: simple, interval_ms: 90000, repeat_count: -1}\n    \
             depends_on:\n      - job: reports.日报\n",
        );
        let found = errors(&cycle);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("cycle"), "{found:?}");
    }

    #[test]
    fn a_missing_calendar_is_an_error_and_an_unknown_upstream_a_warning() {
        let bad = GOOD
            .replace("calendar: 节假日", "calendar: holidays")
            .replace("job: ingest.raw", "job: ingest.cooked");
        let found = errors(&bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("holidays") && found[0].starts_with("jobs.yaml:17:"),
            "{found:?}"
        );
        // An upstream the files do not hold may exist on the server (an export of one group).
        let loaded = read_text(Path::new("jobs.yaml"), &bad).unwrap_or_default();
        let warnings: Vec<String> = check(&loaded, now())
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("ingest.cooked") && w.starts_with("jobs.yaml:19:")),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_dotted_name_resolves_to_the_job_the_files_have() {
        let jobs: BTreeSet<(String, String)> = [
            ("default".to_string(), "daily.report".to_string()),
            ("etl".to_string(), "load".to_string()),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            resolve_job("daily.report", &jobs),
            Some(("default".into(), "daily.report".into()))
        );
        assert_eq!(
            resolve_job("etl.load", &jobs),
            Some(("etl".into(), "load".into()))
        );
        assert_eq!(resolve_job("etl.missing", &jobs), None);
    }
}
