//! The book's command sessions, run: every ```` ```console ```` block under `docs/src` is a
//! session against a real `chime up` (this test's), and what each command prints must be what
//! the book shows. A flag renamed in the code fails here until the book follows.
//!
//! In a block, a line `$ COMMAND` is run with `sh -c` (in one working directory per page, with
//! `chime` on the PATH and the installation's settings in the environment); the lines up to the
//! next `$ ` are its expected output, stdout then stderr. `[..]` in an expected line stands for
//! any text within the line (an id, a time), and a line `...` for any number of lines.
//!
//! The services move tasks on their own (a worker runs one, the dependency service fails its
//! downstream), so a command that only reads (`chime task list`, `job show`, …) is run again
//! until it prints what the book shows, for up to 20 s, as a user would look again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_tests::TestEnv;

/// One command of a session, where the book has it.
struct Step {
    page: PathBuf,
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The sessions of one page, in order.
fn sessions(page: &Path) -> Result<Vec<Step>> {
    let text = std::fs::read_to_string(page)?;
    let mut steps: Vec<Step> = Vec::new();
    let mut inside = false;
    // A block indented under a list item: its lines lose the fence's indentation.
    let mut indent = 0;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            inside = !inside && trimmed.trim_start_matches('`').trim() == "console";
            indent = line.len() - trimmed.len();
            continue;
        }
        if !inside {
            continue;
        }
        let line = line.get(indent..).unwrap_or(line.trim_start());
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                page: page.to_path_buf(),
                line: number + 1,
                command: command.to_owned(),
                expected: Vec::new(),
            });
        } else if let Some(step) = steps.last_mut() {
            step.expected.push(line.to_owned());
        }
    }
    Ok(steps)
}

/// How long a reading command is run again before its output counts as wrong.
const SETTLE: Duration = Duration::from_secs(20);

/// Whether `command` only reads what chime holds, so running it again changes nothing: one
/// reading `chime` verb, nothing chained, piped or redirected after it.
fn only_reads(command: &str) -> bool {
    if command.contains([';', '&', '|', '>', '<', '`', '$', '\n']) {
        return false;
    }
    const READS: &[&str] = &[
        "task list",
        "task show",
        "task logs",
        "job list",
        "job show",
        "trigger list",
        "trigger show",
        "backfill list",
        "backfill show",
        "webhook list",
        "workers",
        "services",
    ];
    command.strip_prefix("chime ").is_some_and(|rest| {
        READS.iter().any(|verb| {
            rest.strip_prefix(verb)
                .is_some_and(|after| after.is_empty() || after.starts_with(' '))
        })
    })
}

/// Whether `actual` is `expected`, with `[..]` for any text in a line.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split("[..]").collect();
    if parts.len() == 1 {
        return expected == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether `actual` is `expected`, with `...` lines for any number of lines.
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, others)| line_matches(first, line) && lines_match(rest, others)),
    }
}

fn pages(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            pages(&path, found)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
    Ok(())
}

#[test]
fn the_matcher_takes_wildcards_and_skipped_lines() {
    assert!(line_matches("task [..] succeeded", "task 01a2 succeeded"));
    assert!(!line_matches("task [..] succeeded", "task 01a2 failed"));
    assert!(line_matches("[..]", ""));
    let expected = vec!["a".to_owned(), "...".to_owned(), "z".to_owned()];
    assert!(lines_match(&expected, &["a", "b", "c", "z"]));
    assert!(lines_match(&expected, &["a", "z"]));
    assert!(!lines_match(&expected, &["a", "b"]));
    assert!(only_reads("chime task list --job report"));
    assert!(only_reads("chime workers"));
    assert!(!only_reads("chime task rerun --job extract"));
    assert!(!only_reads("chime workers-of-another-kind"));
    assert!(!only_reads("chime task list && chime task rerun --job x"));
    assert!(!only_reads("chime task list; chime job delete x"));
    assert!(!only_reads("chime task list $(chime job run x)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_books_command_sessions_print_what_the_book_shows() -> Result<()> {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src");
    let mut found = Vec::new();
    pages(&book, &mut found)?;
    found.sort();
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    // `chime` on the PATH: the binary the tests built, under its own name.
    let bin = chime_tests::scratch_dir("book-bin")?;
    std::os::unix::fs::symlink(chime_tests::chime_binary()?, bin.join("chime"))?;
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    let mut failures = Vec::new();
    for page in &found {
        let steps = sessions(page)?;
        if steps.is_empty() {
            continue;
        }
        let dir = chime_tests::scratch_dir("book-page")?;
        for step in steps {
            let started = Instant::now();
            let printed = loop {
                let out = tokio::process::Command::new("sh")
                    .arg("-c")
                    .arg(&step.command)
                    .current_dir(&dir)
                    .env("PATH", &path)
                    .env("CHIME_API_URL", env.api_url())
                    .env("CHIME_CONFIG", "/nonexistent/chime.toml")
                    .env_remove("CHIME_API_TOKEN")
                    .output()
                    .await
                    .with_context(|| format!("running {}", step.command))?;
                let mut printed = String::from_utf8_lossy(&out.stdout).into_owned();
                printed.push_str(&String::from_utf8_lossy(&out.stderr));
                let actual: Vec<&str> = printed.lines().collect();
                if lines_match(&step.expected, &actual)
                    || !only_reads(&step.command)
                    || started.elapsed() > SETTLE
                {
                    break printed;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            };
            ran += 1;
            let actual: Vec<&str> = printed.lines().collect();
            if !lines_match(&step.expected, &actual) {
                failures.push(format!(
                    "{}:{}: $ {}\n--- the book shows\n{}\n--- it printed\n{}",
                    step.page
                        .strip_prefix(&book)
                        .unwrap_or(&step.page)
                        .display(),
                    step.line,
                    step.command,
                    step.expected.join("\n"),
                    printed.trim_end()
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&bin);
    env.cleanup().await?;
    assert!(ran > 0, "no ```console session in the book");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    Ok(())
}

/// The commands `chime <path> --help` lists under "Commands:" (without `help`).
fn listed_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim_end() != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The generated CLI reference has a section for every command `chime --help` lists, and for
/// every subcommand those list in turn.
#[test]
fn the_cli_reference_lists_every_command_the_help_lists() -> Result<()> {
    let reference = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/cli.md"),
    )?;
    let binary = chime_tests::chime_binary()?;
    let mut pending = vec![Vec::<String>::new()];
    let mut checked = 0;
    let mut missing = Vec::new();
    while let Some(path) = pending.pop() {
        let out = std::process::Command::new(&binary)
            .args(&path)
            .arg("--help")
            .env("CHIME_CONFIG", "/nonexistent/chime.toml")
            .output()?;
        let help = String::from_utf8_lossy(&out.stdout);
        for command in listed_commands(&help) {
            let mut sub = path.clone();
            sub.push(command);
            let heading = format!("## `chime {}`", sub.join(" "));
            if !reference.lines().any(|line| line == heading) {
                missing.push(heading);
            }
            checked += 1;
            pending.push(sub);
        }
    }
    assert!(
        checked > 50,
        "only {checked} commands found in chime's help"
    );
    assert!(
        missing.is_empty(),
        "docs/src/reference/cli.md lacks: {missing:?} (run scripts/docs)"
    );
    Ok(())
}

/// The AMQP reference lists a task event's fields from `TaskEvent`'s schema, but the outbox
/// writes events with the SQL function `task_event`: the two must name the same fields.
#[tokio::test]
async fn the_task_events_the_store_writes_have_the_fields_the_reference_lists() -> Result<()> {
    use chime_core::model::message::TaskEvent;
    use utoipa::PartialSchema;
    let env = TestEnv::new().await?;
    let event: serde_json::Value = sqlx::query_scalar(
        "SELECT task_event(gen_random_uuid(), 2, 'failed', 'default', 7, now(), 'lost', now())",
    )
    .fetch_one(env.store.pool())
    .await?;
    let written: std::collections::BTreeSet<String> = event
        .as_object()
        .context("a task event is a JSON object")?
        .keys()
        .cloned()
        .collect();
    let schema = serde_json::to_value(TaskEvent::schema())?;
    let listed: std::collections::BTreeSet<String> = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .context("TaskEvent's schema has properties")?
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        written, listed,
        "task_event() and TaskEvent name other fields"
    );
    serde_json::from_value::<TaskEvent>(event)?;
    let reference = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/amqp.md"),
    )?;
    for field in &listed {
        assert!(
            reference.contains(&format!("| `{field}` |")),
            "docs/src/reference/amqp.md does not list the event field {field} (run scripts/docs)"
        );
    }
    env.cleanup().await?;
    Ok(())
}
