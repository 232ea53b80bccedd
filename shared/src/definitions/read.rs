//! Reading definitions files: the paths given (files, or directories searched recursively for
//! `*.yaml` and `*.yml`, in the byte order of their paths, so every machine reads them in the
//! same order), each file's YAML documents, and where every node of each document is, so that a
//! problem found later (a bad cron, a job named twice) names its `file:line:column`.
//!
//! Each document is parsed twice: once into [`Definitions`], whose own errors (YAML syntax, an
//! unknown field, a wrong type) carry their location, and once into a tree of locations that
//! [`Loaded::problem`] walks by the path of the field a check found wrong.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{Location, Spanned};

use super::format::Definitions;

/// The largest definitions file read, in bytes: a thousand jobs take well under a megabyte, and
/// a file much larger is more likely a mistake (a log, a dump) than a schedule.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A problem in the definitions, where it is: `file:line:column: message` (the line and column
/// 0 when it belongs to a whole file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, as given or found.
    pub file: PathBuf,
    /// The line, from 1 (0: the whole file).
    pub line: u64,
    /// The column, from 1.
    pub column: u64,
    /// What is wrong, and what is accepted.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file.display(),
                self.line,
                self.column,
                self.message
            )
        }
    }
}

/// One step of the path to a field in a document: a key, or an index in a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A mapping's key.
    Key(&'static str),
    /// A list's element.
    Index(usize),
}

/// Every document read, in order.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The documents, file by file in the order read.
    pub documents: Vec<Document>,
}

/// One YAML document of one file.
#[derive(Debug)]
pub struct Document {
    /// Its file.
    pub file: PathBuf,
    /// What it defines.
    pub definitions: Definitions,
    tree: Node,
}

impl Loaded {
    /// Everything every document defines, in the order read.
    pub fn definitions(&self) -> Definitions {
        let mut all = Definitions::default();
        for document in &self.documents {
            all.extend(document.definitions.clone());
        }
        all
    }

    /// A problem at `path` in document `document`: at the field the path names, or at the
    /// nearest of its parents the document has.
    pub fn problem(&self, document: usize, path: &[Step], message: String) -> Problem {
        let Some(doc) = self.documents.get(document) else {
            return Problem {
                file: PathBuf::new(),
                line: 0,
                column: 0,
                message,
            };
        };
        let at = doc.tree.locate(path);
        Problem {
            file: doc.file.clone(),
            line: at.line,
            column: at.column,
            message,
        }
    }
}

impl Document {
    /// A document read from another format (Quartz's job XML): what it defines, and where in
    /// its file each part is, as the path to it (`jobs[2].triggers[0]`) with its line and
    /// column, so that a problem found in it is placed as in a YAML file.
    pub fn from_places(
        file: PathBuf,
        definitions: Definitions,
        places: &[(Vec<Step>, u64, u64)],
    ) -> Self {
        let mut tree = Node {
            at: Some(Place { line: 1, column: 1 }),
            children: Children::Leaf,
        };
        for (path, line, column) in places {
            let mut node = &mut tree;
            for step in path {
                node = node.child(step);
            }
            node.at = Some(Place {
                line: *line,
                column: *column,
            });
        }
        Document {
            file,
            definitions,
            tree,
        }
    }
}

impl Loaded {
    /// Where the files define `object`, as the document and the path to it; the first place
    /// when several do.
    pub fn locate(&self, object: &super::plan::Object) -> Option<(usize, Vec<Step>)> {
        use super::plan::Object;
        for (d, document) in self.documents.iter().enumerate() {
            let defs = &document.definitions;
            let found = match object {
                Object::WorkerGroup(name) => defs
                    .worker_groups
                    .iter()
                    .position(|g| &g.name == name)
                    .map(|i| vec![Step::Key("worker_groups"), Step::Index(i)]),
                Object::Route(kind) => defs
                    .routes
                    .iter()
                    .position(|r| &r.kind == kind)
                    .map(|i| vec![Step::Key("routes"), Step::Index(i)]),
                Object::Calendar(name) => defs
                    .calendars
                    .iter()
                    .position(|c| &c.name == name)
                    .map(|i| vec![Step::Key("calendars"), Step::Index(i)]),
                Object::Job(group, name) => defs
                    .jobs
                    .iter()
                    .position(|j| j.group() == group && &j.name == name)
                    .map(|i| vec![Step::Key("jobs"), Step::Index(i)]),
                Object::Trigger(group, name) => defs.jobs.iter().enumerate().find_map(|(i, j)| {
                    j.triggers
                        .iter()
                        .position(|t| t.group() == group && &t.name == name)
                        .map(|k| {
                            vec![
                                Step::Key("jobs"),
                                Step::Index(i),
                                Step::Key("triggers"),
                                Step::Index(k),
                            ]
                        })
                }),
                Object::Dependency((group, name), (upstream_group, upstream)) => {
                    let dotted = format!("{upstream_group}.{upstream}");
                    defs.jobs
                        .iter()
                        .enumerate()
                        .filter(|(_, j)| j.group() == group && &j.name == name)
                        .find_map(|(i, j)| {
                            j.depends_on
                                .iter()
                                .position(|u| {
                                    u.job == dotted
                                        || (upstream_group == "default" && &u.job == upstream)
                                })
                                .map(|k| {
                                    vec![
                                        Step::Key("jobs"),
                                        Step::Index(i),
                                        Step::Key("depends_on"),
                                        Step::Index(k),
                                    ]
                                })
                        })
                }
            };
            if let Some(path) = found {
                return Some((d, path));
            }
        }
        None
    }

    /// A message that begins with an object's name (`job reports.daily: …`, as an apply's
    /// errors do) as a problem at the place the files define that object; None when it names
    /// none of them.
    pub fn place(&self, message: &str) -> Option<Problem> {
        // The object's name may itself hold ": " (names are free text): each prefix is tried.
        message.match_indices(": ").find_map(|(at, _)| {
            super::plan::Object::parse(&message[..at])
                .iter()
                .find_map(|object| self.locate(object))
                .map(|(document, path)| self.problem(document, &path, message.to_string()))
        })
    }
}

/// Reads every definitions file under `paths`. Returns every problem found in any of them (a
/// file that cannot be read, a document that does not parse), not only the first.
pub fn read(paths: &[PathBuf]) -> Result<Loaded, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        if let Err(problem) = collect(path, &mut files) {
            problems.push(problem);
        }
    }
    if files.is_empty() && problems.is_empty() {
        problems.push(whole_file(
            paths
                .first()
                .map(PathBuf::as_path)
                .unwrap_or(Path::new(".")),
            "no definitions files (*.yaml, *.yml) here".into(),
        ));
    }
    let mut loaded = Loaded::default();
    for file in files {
        match read_file(&file) {
            Ok(documents) => loaded.documents.extend(documents),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        Ok(loaded)
    } else {
        Err(problems)
    }
}

/// Parses `text` as the definitions of `file` (which need not exist): for files given on
/// standard input, and for tests.
pub fn read_text(file: &Path, text: &str) -> Result<Loaded, Vec<Problem>> {
    parse(file, text)
        .map(|documents| Loaded { documents })
        .map_err(|problem| vec![problem])
}

fn whole_file(file: &Path, message: String) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: 0,
        column: 0,
        message,
    }
}

/// Adds `path` (a file, taken whatever its name) or the definitions files under it (a
/// directory) to `files`, a directory's in the byte order of their paths. Hidden entries
/// (`.git`) are skipped.
fn collect(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), Problem> {
    let meta =
        std::fs::metadata(path).map_err(|e| whole_file(path, format!("cannot read it: {e}")))?;
    if !meta.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut found = Vec::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| whole_file(&dir, format!("cannot read the directory: {e}")))?;
        for entry in entries {
            let entry =
                entry.map_err(|e| whole_file(&dir, format!("cannot read the directory: {e}")))?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let child = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| whole_file(&child, format!("cannot read it: {e}")))?;
            if kind.is_dir() {
                dirs.push(child);
            } else if child
                .extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
            {
                found.push(child);
            }
        }
    }
    found.sort();
    files.extend(found);
    Ok(())
}

fn read_file(file: &Path) -> Result<Vec<Document>, Problem> {
    let size = std::fs::metadata(file)
        .map_err(|e| whole_file(file, format!("cannot read it: {e}")))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(whole_file(
            file,
            format!(
                "{:.1} MB, larger than a definitions file may be ({} MB): split it into several \
                 files in a directory",
                size as f64 / 1e6,
                MAX_FILE_BYTES / 1024 / 1024
            ),
        ));
    }
    let bytes =
        std::fs::read(file).map_err(|e| whole_file(file, format!("cannot read it: {e}")))?;
    let text =
        String::from_utf8(bytes).map_err(|e| whole_file(file, format!("not UTF-8 text: {e}")))?;
    parse(file, &text)
}

fn options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    // The message alone: the location is shown as `file:line:column`.
    options.with_snippet = false;
    options
}

fn parse(file: &Path, text: &str) -> Result<Vec<Document>, Problem> {
    let located = |error: serde_saphyr::Error| {
        let at = error.location().unwrap_or(Location::UNKNOWN);
        Problem {
            file: file.to_path_buf(),
            line: at.line(),
            column: at.column(),
            message: plain_message(&error),
        }
    };
    let definitions: Vec<Option<Definitions>> =
        serde_saphyr::from_str_multiple_with_options(text, options()).map_err(located)?;
    let trees: Vec<Option<Node>> =
        serde_saphyr::from_str_multiple_with_options(text, options()).map_err(located)?;
    Ok(definitions
        .into_iter()
        .zip(trees)
        // An empty document (a file of comments, a trailing `---`) defines nothing.
        .filter_map(|(definitions, tree)| {
            Some(Document {
                file: file.to_path_buf(),
                definitions: definitions?,
                tree: tree.unwrap_or_default(),
            })
        })
        .collect())
}

/// The error's message without the location serde-saphyr appends (shown as `file:line:column`
/// instead).
fn plain_message(error: &serde_saphyr::Error) -> String {
    let text = error.to_string();
    let text = text.trim();
    match text.rfind(" at line ") {
        Some(at) if text[at..].contains("column") => text[..at].to_string(),
        _ => text.to_string(),
    }
}

/// Where a node of a document is, with its children: enough to name the line of any field.
#[derive(Debug, Default)]
struct Node {
    at: Option<Place>,
    children: Children,
}

/// A line and column, from 1.
#[derive(Debug, Clone, Copy)]
struct Place {
    line: u64,
    column: u64,
}

impl Place {
    const UNKNOWN: Place = Place { line: 0, column: 0 };
}

#[derive(Debug, Default)]
enum Children {
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
    #[default]
    Leaf,
}

impl Node {
    /// The child at `step`, made (with no place of its own) if missing.
    fn child(&mut self, step: &Step) -> &mut Node {
        let empty = || Node {
            at: None,
            children: Children::Leaf,
        };
        match step {
            Step::Key(key) => {
                if !matches!(self.children, Children::Map(_)) {
                    self.children = Children::Map(Vec::new());
                }
                let Children::Map(entries) = &mut self.children else {
                    unreachable!("made a map above")
                };
                let i = match entries.iter().position(|(k, _)| k == key) {
                    Some(i) => i,
                    None => {
                        entries.push(((*key).to_string(), empty()));
                        entries.len() - 1
                    }
                };
                &mut entries[i].1
            }
            Step::Index(index) => {
                if !matches!(self.children, Children::Seq(_)) {
                    self.children = Children::Seq(Vec::new());
                }
                let Children::Seq(items) = &mut self.children else {
                    unreachable!("made a list above")
                };
                while items.len() <= *index {
                    items.push(empty());
                }
                &mut items[*index]
            }
        }
    }

    /// The location of the node at `path`, or of the deepest node on the way to it.
    fn locate(&self, path: &[Step]) -> Place {
        let mut node = self;
        let mut at = self.at.unwrap_or(Place::UNKNOWN);
        for step in path {
            let next = match (&node.children, step) {
                (Children::Map(entries), Step::Key(key)) => {
                    entries.iter().find(|(k, _)| k == key).map(|(_, n)| n)
                }
                (Children::Seq(items), Step::Index(i)) => items.get(*i),
                _ => None,
            };
            let Some(next) = next else {
                break;
            };
            node = next;
            if let Some(here) = node.at {
                at = here;
            }
        }
        at
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Children>::deserialize(deserializer)?;
        let at = (spanned.referenced != Location::UNKNOWN).then_some(Place {
            line: spanned.referenced.line(),
            column: spanned.referenced.column(),
        });
        Ok(Node {
            at,
            children: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Children {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ChildrenVisitor)
    }
}

struct ChildrenVisitor;

impl<'de> Visitor<'de> for ChildrenVisitor {
    type Value = Children;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Children, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<KeyText>()? {
            entries.push((key.0, map.next_value::<Node>()?));
        }
        Ok(Children::Map(entries))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Children, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Children::Seq(items))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Children, E> {
        Ok(Children::Leaf)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Children, E> {
        Ok(Children::Leaf)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Children, E> {
        Ok(Children::Leaf)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Children, E> {
        Ok(Children::Leaf)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Children, E> {
        Ok(Children::Leaf)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Children, E> {
        Ok(Children::Leaf)
    }
    fn visit_none<E: de::Error>(self) -> Result<Children, E> {
        Ok(Children::Leaf)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Children, D::Error> {
        d.deserialize_any(ChildrenVisitor)
    }
}

/// A mapping key as text, whatever scalar it is.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText(String::new()))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}
