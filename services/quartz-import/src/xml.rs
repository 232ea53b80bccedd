//! Quartz's job-scheduling-data XML (`quartz_data.xml`, the `job_scheduling_data_2_0.xsd`
//! format Quartz's `XMLSchedulingDataProcessorPlugin` loads) read as chime definitions, so that
//! `chime apply -f quartz_data.xml` applies a Quartz user's file as it is.
//!
//! Jobs become jobs (their class through the same `--job-class` mapping `chime import quartz`
//! takes, their `job-data-map` their data), `simple`, `cron` and `calendar-interval` triggers
//! become triggers under their job with Quartz's misfire instruction as chime's policy, and the
//! file's `pre-processing-commands` and `processing-directives` become the apply's deletions
//! and its rule for what exists already. Each object keeps its element's line and column, so a
//! problem in it is reported at its place in the XML. Quartz's defaults hold where the file says
//! nothing: group `DEFAULT`, priority 5, the smart misfire policy, a start of "when applied",
//! and the JVM's zone (`--jvm-time-zone`) for a cron or calendar-interval trigger without its
//! own and for a time written without an offset.
//!
//! The XML is parsed by `roxmltree`, which reads no DTD and resolves no external entity.

use std::path::Path;

use chime_core::definitions::read::{Document, MAX_FILE_BYTES, Step};
use chime_core::definitions::{JobDefinition, Problem, TriggerDefinition};
use chime_core::schedule::{IntervalUnit, ScheduleSpec};
use chime_core::store::definitions::{Existing, Removal, RemovalKind};
use jiff::Timestamp;
use roxmltree::Node;
use serde_json::{Map, Value, json};

use crate::mapping::{JobClassMappings, Target};

/// Quartz's group for a job or trigger that names none.
pub const QUARTZ_DEFAULT_GROUP: &str = "DEFAULT";

/// How to read what a Quartz file leaves to the JVM.
#[derive(Debug, Clone, Default)]
pub struct XmlOptions {
    /// `--job-class` and `--job-classes`: what each job class runs as.
    pub mappings: JobClassMappings,
    /// `--jvm-time-zone`: the zone the Quartz nodes ran in, for triggers and times without one.
    pub jvm_zone: Option<String>,
}

/// One Quartz file, read.
#[derive(Debug)]
pub struct QuartzFile {
    /// Its jobs and triggers, with the place of each.
    pub document: Document,
    /// Its `pre-processing-commands`.
    pub delete: Vec<Removal>,
    /// Its `processing-directives`.
    pub existing: Existing,
    /// What was read differently from Quartz, one line each.
    pub warnings: Vec<String>,
}

/// Whether `path` is read as a Quartz file (by its extension).
pub fn is_quartz_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("xml"))
}

/// Reads the Quartz file at `path`.
pub fn read_file(path: &Path, options: &XmlOptions) -> Result<QuartzFile, Vec<Problem>> {
    let whole = |message: String| {
        vec![Problem {
            file: path.to_path_buf(),
            line: 0,
            column: 0,
            message,
        }]
    };
    let size = std::fs::metadata(path)
        .map_err(|e| whole(format!("cannot read it: {e}")))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(whole(format!(
            "{size} bytes, over the limit of {MAX_FILE_BYTES}: split it"
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| whole(format!("cannot read it: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| whole(format!("not UTF-8 text: {e}")))?;
    read_text(path, &text, options)
}

/// Reads `text` as the Quartz file `path`.
pub fn read_text(
    path: &Path,
    text: &str,
    options: &XmlOptions,
) -> Result<QuartzFile, Vec<Problem>> {
    let xml = roxmltree::Document::parse(text).map_err(|e| {
        let at = e.pos();
        vec![Problem {
            file: path.to_path_buf(),
            line: u64::from(at.row),
            column: u64::from(at.col),
            message: format!("not well-formed XML: {e}"),
        }]
    })?;
    let mut reader = Reader {
        path,
        xml: &xml,
        options,
        problems: Vec::new(),
        warnings: Vec::new(),
        places: Vec::new(),
        named_jobs: std::collections::HashSet::new(),
    };
    let root = xml.root_element();
    if root.tag_name().name() != "job-scheduling-data" {
        reader.problem(
            root,
            format!(
                "the root element is <{}>: a Quartz file's is <job-scheduling-data> \
                 (job_scheduling_data_2_0.xsd)",
                root.tag_name().name()
            ),
        );
        return Err(reader.problems);
    }
    let mut delete = Vec::new();
    let mut existing = Existing::Update;
    let mut jobs: Vec<JobDefinition> = Vec::new();
    let mut triggers = Vec::new();
    for section in root.children().filter(Node::is_element) {
        match section.tag_name().name() {
            "pre-processing-commands" => {
                for command in section.children().filter(Node::is_element) {
                    if let Some(removal) = reader.removal(command) {
                        delete.push(removal);
                    }
                }
            }
            "processing-directives" => existing = reader.directives(section),
            "schedule" => {
                for item in section.children().filter(Node::is_element) {
                    match item.tag_name().name() {
                        "job" => {
                            if let Some(job) = reader.job(item, jobs.len()) {
                                jobs.push(job);
                            }
                        }
                        "trigger" => triggers.push(item),
                        other => reader.problem(
                            item,
                            format!("<{other}> in <schedule>: use <job> or <trigger>"),
                        ),
                    }
                }
            }
            other => reader.problem(
                section,
                format!(
                    "<{other}>: use <pre-processing-commands>, <processing-directives> or \
                     <schedule>"
                ),
            ),
        }
    }
    for element in triggers {
        reader.trigger(element, &mut jobs);
    }
    if !reader.problems.is_empty() {
        return Err(reader.problems);
    }
    let definitions = chime_core::definitions::Definitions {
        jobs,
        ..Default::default()
    };
    Ok(QuartzFile {
        document: Document::from_places(path.to_path_buf(), definitions, &reader.places),
        delete,
        existing,
        warnings: reader.warnings,
    })
}

struct Reader<'a, 'x> {
    path: &'a Path,
    xml: &'a roxmltree::Document<'x>,
    options: &'a XmlOptions,
    problems: Vec<Problem>,
    warnings: Vec<String>,
    places: Vec<(Vec<Step>, u64, u64)>,
    /// Every job the file names, read or not: a trigger of one that could not be read is not
    /// a second problem.
    named_jobs: std::collections::HashSet<(String, String)>,
}

impl<'x> Reader<'_, 'x> {
    fn at(&self, node: Node<'_, 'x>) -> (u64, u64) {
        let at = self.xml.text_pos_at(node.range().start);
        (u64::from(at.row), u64::from(at.col))
    }

    fn problem(&mut self, node: Node<'_, 'x>, message: String) {
        let (line, column) = self.at(node);
        self.problems.push(Problem {
            file: self.path.to_path_buf(),
            line,
            column,
            message,
        });
    }

    fn place(&mut self, path: Vec<Step>, node: Node<'_, 'x>) {
        let (line, column) = self.at(node);
        self.places.push((path, line, column));
    }

    /// The text of `parent`'s child `name`, trimmed; None when absent or empty.
    fn text<'n>(&self, parent: Node<'n, 'x>, name: &str) -> Option<(Node<'n, 'x>, String)> {
        let child = parent
            .children()
            .find(|c| c.is_element() && c.tag_name().name() == name)?;
        let text = child.text().unwrap_or_default().trim().to_string();
        (!text.is_empty()).then_some((child, text))
    }

    fn required(&mut self, parent: Node<'_, 'x>, name: &str) -> Option<String> {
        match self.text(parent, name) {
            Some((_, text)) => Some(text),
            None => {
                self.problem(
                    parent,
                    format!("<{}> has no <{name}>", parent.tag_name().name()),
                );
                None
            }
        }
    }

    fn boolean(&mut self, parent: Node<'_, 'x>, name: &str) -> Option<bool> {
        let (node, text) = self.text(parent, name)?;
        match text.as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            other => {
                self.problem(node, format!("<{name}> {other:?}: use true or false"));
                None
            }
        }
    }

    fn integer(&mut self, parent: Node<'_, 'x>, name: &str) -> Option<i64> {
        let (node, text) = self.text(parent, name)?;
        match text.parse() {
            Ok(n) => Some(n),
            Err(_) => {
                self.problem(node, format!("<{name}> {text:?} is not a whole number"));
                None
            }
        }
    }

    fn removal(&mut self, command: Node<'_, 'x>) -> Option<Removal> {
        let (kind, whole_group) = match command.tag_name().name() {
            "delete-jobs-in-group" => (RemovalKind::Job, true),
            "delete-triggers-in-group" => (RemovalKind::Trigger, true),
            "delete-job" => (RemovalKind::Job, false),
            "delete-trigger" => (RemovalKind::Trigger, false),
            other => {
                self.problem(
                    command,
                    format!(
                        "<{other}>: use <delete-jobs-in-group>, <delete-triggers-in-group>, \
                         <delete-job> or <delete-trigger>"
                    ),
                );
                return None;
            }
        };
        if whole_group {
            let group = command.text().unwrap_or_default().trim().to_string();
            if group.is_empty() {
                self.problem(command, "names no group (use * for every group)".into());
                return None;
            }
            return Some(Removal {
                kind,
                group,
                name: None,
            });
        }
        let name = self.required(command, "name")?;
        let group = self
            .text(command, "group")
            .map_or(QUARTZ_DEFAULT_GROUP.to_string(), |(_, g)| g);
        Some(Removal {
            kind,
            group,
            name: Some(name),
        })
    }

    fn directives(&mut self, section: Node<'_, 'x>) -> Existing {
        let overwrite = self
            .boolean(section, "overwrite-existing-data")
            .unwrap_or(true);
        let ignore = self.boolean(section, "ignore-duplicates").unwrap_or(false);
        match (overwrite, ignore) {
            (true, _) => Existing::Update,
            (false, true) => Existing::Keep,
            (false, false) => Existing::Refuse,
        }
    }

    /// A `job-data-map`'s entries as a JSON object of strings (Quartz's XML values are text).
    fn data_map(&mut self, parent: Node<'_, 'x>) -> Value {
        let Some(map) = parent
            .children()
            .find(|c| c.is_element() && c.tag_name().name() == "job-data-map")
        else {
            return Value::Null;
        };
        let mut data = Map::new();
        for entry in map.children().filter(Node::is_element) {
            let key = self.required(entry, "key");
            let value = self
                .text(entry, "value")
                .map(|(_, v)| v)
                .unwrap_or_default();
            if let Some(key) = key {
                data.insert(key, Value::String(value));
            }
        }
        Value::Object(data)
    }

    fn job(&mut self, element: Node<'_, 'x>, index: usize) -> Option<JobDefinition> {
        let name = self.required(element, "name")?;
        let group = self
            .text(element, "group")
            .map_or(QUARTZ_DEFAULT_GROUP.to_string(), |(_, g)| g);
        self.named_jobs.insert((group.clone(), name.clone()));
        let (class_node, class) = match self.text(element, "job-class") {
            Some(found) => found,
            None => {
                self.problem(element, format!("job {group}.{name} has no <job-class>"));
                return None;
            }
        };
        let (kind, spec) = match self.options.mappings.get(&class) {
            Some(Target::Shell(command)) => ("shell", json!({ "command": command })),
            Some(Target::Http(url)) => (
                "http",
                json!({ "url": url, "method": "POST", "send_data": true }),
            ),
            None => {
                self.problem(
                    class_node,
                    format!(
                        "job {group}.{name}: its class {class} has no chime command: give \
                         --job-class {class}=shell:COMMAND (or =http:URL), or a line in \
                         --job-classes FILE"
                    ),
                );
                return None;
            }
        };
        let path = vec![Step::Key("jobs"), Step::Index(index)];
        self.place(path.clone(), element);
        self.place([&path[..], &[Step::Key("kind")]].concat(), class_node);
        self.place([&path[..], &[Step::Key("spec")]].concat(), class_node);
        Some(JobDefinition {
            group: Some(group),
            name,
            description: self.text(element, "description").map(|(_, d)| d),
            kind: kind.to_string(),
            spec,
            worker_group: None,
            priority: None,
            concurrent: None,
            requests_recovery: self.boolean(element, "recover"),
            data: self.data_map(element),
            reject_retries: None,
            reject_interval_ms: None,
            failed_retries: None,
            failed_interval_ms: None,
            backoff: None,
            timeout_ms: None,
            data_time_period: None,
            data_time_zone: None,
            execute_user: None,
            retention_days: None,
            expect_success_within_ms: None,
            triggers: Vec::new(),
            depends_on: Vec::new(),
        })
    }

    /// A time as Quartz's reader takes it (`xsd:dateTime`); one without an offset is in the
    /// JVM's zone.
    fn time(&mut self, parent: Node<'_, 'x>, name: &str) -> Option<Timestamp> {
        let (node, text) = self.text(parent, name)?;
        if let Ok(t) = text.parse::<Timestamp>() {
            return Some(t);
        }
        let civil = text.parse::<jiff::civil::DateTime>().ok();
        match (civil, &self.options.jvm_zone) {
            (Some(civil), Some(zone)) => {
                let zoned = chime_core::schedule::named_zone(zone)
                    .ok_or_else(|| format!("--jvm-time-zone {zone:?} is not a time zone"))
                    .and_then(|tz| civil.to_zoned(tz).map_err(|e| e.to_string()));
                match zoned {
                    Ok(zoned) => Some(zoned.timestamp()),
                    Err(e) => {
                        self.problem(node, format!("<{name}> {text:?} in {zone}: {e}"));
                        None
                    }
                }
            }
            (Some(_), None) => {
                self.problem(
                    node,
                    format!(
                        "<{name}> {text:?} has no offset, so Quartz reads it in the JVM's zone: \
                         give --jvm-time-zone, or write the offset (2026-01-01T09:00:00+01:00)"
                    ),
                );
                None
            }
            (None, _) => {
                self.problem(
                    node,
                    format!("<{name}> {text:?} is not a date and time (2026-01-01T09:00:00Z)"),
                );
                None
            }
        }
    }

    fn zone(&mut self, parent: Node<'_, 'x>, trigger: &str) -> Option<String> {
        if let Some((node, id)) = self.text(parent, "time-zone") {
            return match crate::zones::to_chime(&id) {
                Ok(zone) => Some(zone),
                Err(e) => {
                    self.problem(node, format!("trigger {trigger}: {e}"));
                    None
                }
            };
        }
        self.jvm_zone(parent, trigger)
    }

    fn jvm_zone(&mut self, parent: Node<'_, 'x>, trigger: &str) -> Option<String> {
        match &self.options.jvm_zone {
            Some(zone) => Some(zone.clone()),
            None => {
                self.problem(
                    parent,
                    format!(
                        "trigger {trigger} has no time zone of its own, so Quartz runs it in the \
                         JVM's: give --jvm-time-zone"
                    ),
                );
                None
            }
        }
    }

    fn trigger(&mut self, element: Node<'_, 'x>, jobs: &mut [JobDefinition]) {
        let Some(kind) = element.children().find(Node::is_element) else {
            self.problem(
                element,
                "<trigger> holds no <simple>, <cron> or <calendar-interval>".into(),
            );
            return;
        };
        let Some(name) = self.required(kind, "name") else {
            return;
        };
        let group = self
            .text(kind, "group")
            .map_or(QUARTZ_DEFAULT_GROUP.to_string(), |(_, g)| g);
        let full = format!("{group}.{name}");
        let Some(job_name) = self.required(kind, "job-name") else {
            return;
        };
        let job_group = self
            .text(kind, "job-group")
            .map_or(QUARTZ_DEFAULT_GROUP.to_string(), |(_, g)| g);
        let Some(job_index) = jobs
            .iter()
            .position(|j| j.group() == job_group && j.name == job_name)
        else {
            if !self
                .named_jobs
                .contains(&(job_group.clone(), job_name.clone()))
            {
                self.problem(
                    kind,
                    format!(
                        "trigger {full} is for job {job_group}.{job_name}, which this file does \
                         not define: chime's definitions hold a trigger under its job"
                    ),
                );
            }
            return;
        };
        let start = if self.text(kind, "start-time-seconds-in-future").is_some() {
            self.warnings.push(format!(
                "trigger {full}: <start-time-seconds-in-future> is read as a start when first \
                 applied (a start that moved at every apply would restart the trigger)"
            ));
            None
        } else {
            self.time(kind, "start-time")
        };
        let end = self.time(kind, "end-time");
        let schedule = match kind.tag_name().name() {
            "simple" => {
                let interval_ms = self.integer(kind, "repeat-interval").unwrap_or(0);
                let repeat_count = self.integer(kind, "repeat-count").unwrap_or(0);
                ScheduleSpec::Simple {
                    interval_ms,
                    repeat_count,
                    start_time: start,
                    end_time: end,
                }
            }
            "cron" => {
                let Some(cron) = self.required(kind, "cron-expression") else {
                    return;
                };
                let Some(zone) = self.zone(kind, &full) else {
                    return;
                };
                ScheduleSpec::Cron {
                    cron,
                    time_zone: Some(zone),
                    start_time: start,
                    end_time: end,
                }
            }
            "calendar-interval" => {
                let interval = self.integer(kind, "repeat-interval").unwrap_or(0);
                let unit = match self.text(kind, "repeat-interval-unit") {
                    None => IntervalUnit::Day,
                    Some((node, text)) => match IntervalUnit::from_quartz(&text) {
                        Some(unit) => unit,
                        None => {
                            self.problem(
                                node,
                                format!(
                                    "<repeat-interval-unit> {text:?}: use SECOND, \
                                     MINUTE, HOUR, DAY, WEEK, MONTH or YEAR"
                                ),
                            );
                            return;
                        }
                    },
                };
                let Ok(interval) = i32::try_from(interval) else {
                    self.problem(
                        kind,
                        format!("trigger {full}: the interval is out of range"),
                    );
                    return;
                };
                // Quartz's reader takes no zone for these: they run in the JVM's.
                if self.text(kind, "time-zone").is_some() {
                    self.warnings.push(format!(
                        "trigger {full}: Quartz's reader ignores a calendar-interval trigger's \
                         <time-zone> (it runs in the JVM's zone), and so does this"
                    ));
                }
                let Some(zone) = self.jvm_zone(kind, &full) else {
                    return;
                };
                ScheduleSpec::CalendarInterval {
                    interval,
                    unit,
                    time_zone: Some(zone),
                    preserve_hour_of_day_across_dst: false,
                    skip_day_if_hour_does_not_exist: false,
                    start_time: start,
                    end_time: end,
                }
            }
            other => {
                self.problem(
                    kind,
                    format!("<{other}> in <trigger>: use <simple>, <cron> or <calendar-interval>"),
                );
                return;
            }
        };
        let misfire_policy = match self.text(kind, "misfire-instruction") {
            None => None,
            Some((node, text)) => {
                let code = misfire_code(&text, matches!(schedule, ScheduleSpec::Simple { .. }));
                match code.map(|c| crate::plan::misfire_policy(&schedule, c)) {
                    Some(Ok(policy)) => Some(policy),
                    _ => {
                        self.problem(
                            node,
                            format!(
                                "trigger {full}: <misfire-instruction> {text:?} is not one of a \
                                 {} trigger's (MISFIRE_INSTRUCTION_SMART_POLICY, …)",
                                kind.tag_name().name()
                            ),
                        );
                        return;
                    }
                }
            }
        };
        let priority = match self.integer(kind, "priority") {
            None => None,
            Some(p) => match i32::try_from(p) {
                Ok(p) => Some(p),
                Err(_) => {
                    self.problem(
                        kind,
                        format!("trigger {full}: the priority is out of range"),
                    );
                    return;
                }
            },
        };
        let job = &mut jobs[job_index];
        let path = vec![
            Step::Key("jobs"),
            Step::Index(job_index),
            Step::Key("triggers"),
            Step::Index(job.triggers.len()),
        ];
        self.place(path.clone(), kind);
        if let Some((node, _)) = self
            .text(kind, "cron-expression")
            .or_else(|| self.text(kind, "repeat-interval"))
        {
            self.place([&path[..], &[Step::Key("schedule")]].concat(), node);
        }
        if let Some((node, _)) = self.text(kind, "calendar-name") {
            self.place([&path[..], &[Step::Key("calendar")]].concat(), node);
        }
        let data = self.data_map(kind);
        let job = &mut jobs[job_index];
        job.triggers.push(TriggerDefinition {
            group: Some(group),
            name,
            schedule,
            calendar: self.text(kind, "calendar-name").map(|(_, c)| c),
            misfire_policy,
            priority,
            description: self.text(kind, "description").map(|(_, d)| d),
            data,
            paused: None,
        });
    }
}

/// A misfire instruction's constant name (with or without its `MISFIRE_INSTRUCTION_` prefix, as
/// Quartz's reader accepts it) as Quartz's number for a simple or other trigger.
fn misfire_code(text: &str, simple: bool) -> Option<i32> {
    let name = text.strip_prefix("MISFIRE_INSTRUCTION_").unwrap_or(text);
    Some(match (name, simple) {
        ("IGNORE_MISFIRE_POLICY", _) => -1,
        ("SMART_POLICY", _) => 0,
        ("FIRE_NOW", true) | ("FIRE_ONCE_NOW", false) => 1,
        ("RESCHEDULE_NOW_WITH_EXISTING_REPEAT_COUNT", true) | ("DO_NOTHING", false) => 2,
        ("RESCHEDULE_NOW_WITH_REMAINING_REPEAT_COUNT", true) => 3,
        ("RESCHEDULE_NEXT_WITH_REMAINING_COUNT", true) => 4,
        ("RESCHEDULE_NEXT_WITH_EXISTING_COUNT", true) => 5,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> XmlOptions {
        let mut mappings = JobClassMappings::default();
        let _ = mappings.add("com.acme.Job=shell:./run.sh", "test");
        XmlOptions {
            mappings,
            jvm_zone: Some("Europe/Berlin".into()),
        }
    }

    fn read(body: &str) -> Result<QuartzFile, Vec<Problem>> {
        let text = format!(
            "<?xml version=\"1.0\"?>\n<job-scheduling-data \
             xmlns=\"http://www.quartz-scheduler.org/xml/JobSchedulingData\" version=\"2.0\">\n\
             {body}\n</job-scheduling-data>\n"
        );
        read_text(Path::new("q.xml"), &text, &options())
    }

    #[test]
    fn quartz_defaults_hold_where_the_file_says_nothing() {
        let file = read(
            "<schedule><job><name>a</name><job-class>com.acme.Job</job-class></job>\
             <trigger><cron><name>t</name><job-name>a</job-name>\
             <cron-expression>0 0 2 * * ?</cron-expression></cron></trigger></schedule>",
        )
        .unwrap_or_else(|p| panic!("{p:?}"));
        let job = &file.document.definitions.jobs[0];
        assert_eq!(job.group(), QUARTZ_DEFAULT_GROUP);
        assert_eq!(job.kind, "shell");
        let trigger = &job.triggers[0];
        assert_eq!(trigger.group(), QUARTZ_DEFAULT_GROUP);
        assert_eq!(trigger.misfire_policy, None);
        match &trigger.schedule {
            ScheduleSpec::Cron {
                time_zone,
                start_time,
                ..
            } => {
                assert_eq!(time_zone.as_deref(), Some("Europe/Berlin"));
                assert_eq!(*start_time, None);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(file.existing, Existing::Update);
    }

    #[test]
    fn commands_and_directives_become_the_applys_rules() {
        let file = read(
            "<pre-processing-commands><delete-jobs-in-group>*</delete-jobs-in-group>\
             <delete-trigger><name>old</name></delete-trigger></pre-processing-commands>\
             <processing-directives><overwrite-existing-data>false</overwrite-existing-data>\
             <ignore-duplicates>true</ignore-duplicates></processing-directives>",
        )
        .unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(
            file.delete,
            [
                Removal {
                    kind: RemovalKind::Job,
                    group: "*".into(),
                    name: None
                },
                Removal {
                    kind: RemovalKind::Trigger,
                    group: QUARTZ_DEFAULT_GROUP.into(),
                    name: Some("old".into())
                }
            ]
        );
        assert_eq!(file.existing, Existing::Keep);
    }

    #[test]
    fn mistakes_are_named_at_their_line() {
        let Err(problems) = read(
            "<schedule>\n<job><name>a</name><job-class>com.acme.Other</job-class></job>\n\
             <trigger><simple><name>t</name><job-name>a</job-name>\
             <repeat-interval>1000</repeat-interval></simple></trigger>\n\
             <trigger><cron><name>u</name><job-name>nowhere</job-name>\
             <cron-expression>0 0 2 * * ?</cron-expression>\
             <misfire-instruction>MISFIRE_INSTRUCTION_NEVER</misfire-instruction>\
             </cron></trigger>\n</schedule>",
        ) else {
            panic!("read a file with mistakes");
        };
        let lines: Vec<(u64, &str)> = problems
            .iter()
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        // The unmapped class, and the trigger of a job that is not in the file; not the trigger
        // of the job that could not be read.
        assert_eq!(problems.len(), 2, "{lines:?}");
        assert_eq!(problems[0].line, 4);
        assert!(
            problems[0]
                .message
                .contains("com.acme.Other has no chime command")
        );
        assert_eq!(problems[1].line, 6);
        assert!(problems[1].message.contains("job DEFAULT.nowhere"));
    }

    #[test]
    fn no_dtd_is_read() {
        let text = "<?xml version=\"1.0\"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\n\
                    <job-scheduling-data>&e;</job-scheduling-data>";
        assert!(read_text(Path::new("q.xml"), text, &options()).is_err());
    }
}
