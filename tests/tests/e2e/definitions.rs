//! Definitions as code: `chime validate` and `chime schema`, with no server at all.

use std::path::Path;
use std::process::Output;

use anyhow::Result;
use chime_tests::{chime_binary, scratch_dir};

/// Runs the CLI with nothing to reach: an API and a database on ports nobody listens on.
pub(crate) fn offline(args: &[&str]) -> Result<Output> {
    let closed = chime_tests::free_port()?;
    Ok(std::process::Command::new(chime_binary()?)
        .args(args)
        .env("CHIME_API_URL", format!("http://127.0.0.1:{closed}"))
        .env(
            "CHIME_DATABASE_URL",
            format!("postgres://nobody@127.0.0.1:{closed}/none"),
        )
        .env("CHIME_CONFIG", "/nonexistent")
        .output()?)
}

const GOOD: &str = r#"worker_groups:
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
"#;

const UPSTREAM: &str = "jobs:\n  - name: raw\n    group: ingest\n    kind: noop\n    \
                        data_time_period: day\n";

pub(crate) fn write(dir: &Path, file: &str, text: &str) -> Result<()> {
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// A directory of files validates with no server reachable; a bad cron among good changes is
/// named at its file and line, with its field and what is accepted, and exits non-zero.
#[test]
fn validate_needs_no_server_and_names_the_line_of_a_bad_cron() -> Result<()> {
    let dir = scratch_dir("definitions-validate")?;
    write(&dir, "chime/reports.yaml", GOOD)?;
    write(&dir, "chime/ingest/raw.yml", UPSTREAM)?;
    write(&dir, "chime/README.md", "not read")?;
    let root = dir.join("chime");
    let out = offline(&["validate", "-f", &root.display().to_string()])?;
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("2 jobs, 1 triggers, 1 dependencies"),
        "{stdout}"
    );

    write(
        &dir,
        "chime/reports.yaml",
        &GOOD.replace("0 0 2 * * ?", "0 0 26 * * ?"),
    )?;
    let out = offline(&["validate", "-f", &root.display().to_string()])?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = root.join("reports.yaml").display().to_string();
    assert!(
        stderr.starts_with(&format!("error: {file}:15:")) && stderr.contains("26 is out of range"),
        "{stderr}"
    );
    Ok(())
}

/// Bad inputs are refused, each with its place and what is wrong: a YAML syntax error, an
/// unknown field (by name, not ignored), a job defined twice, a cycle, a missing calendar, and
/// a file too large to be a schedule.
#[test]
fn validate_refuses_bad_files_naming_each_problem() -> Result<()> {
    let dir = scratch_dir("definitions-bad")?;
    let cases: [(&str, String, &str); 6] = [
        (
            "syntax",
            "jobs:\n  - name: [unclosed\n".into(),
            "syntax.yaml:",
        ),
        (
            "unknown",
            GOOD.replace("    worker_group: etl\n", "    worker_grup: etl\n"),
            "unknown field `worker_grup`",
        ),
        (
            "twice",
            format!("{GOOD}{}\n---\n{UPSTREAM}", &UPSTREAM[5..]),
            "is defined twice (first at",
        ),
        (
            "cycle",
            format!(
                "{GOOD}{}    depends_on:\n      - job: reports.日报\n",
                &UPSTREAM[5..]
            ),
            "a dependency cycle: ",
        ),
        (
            "calendar",
            format!(
                "{}{}",
                GOOD.replace("calendar: 节假日", "calendar: holidays"),
                &UPSTREAM[5..]
            ),
            "calendar \"holidays\" is not defined",
        ),
        (
            "large",
            format!("# {}\n", "x".repeat(10 * 1024 * 1024)),
            "larger than a definitions file may be",
        ),
    ];
    for (name, text, expected) in cases {
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(&file, text)?;
        let out = offline(&["validate", "-f", &file.display().to_string()])?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(expected) && stderr.contains(&format!("{name}.yaml")),
            "{name}: {stderr}"
        );
    }
    Ok(())
}

/// `chime schema` prints a JSON Schema whose references all resolve, describing jobs with their
/// triggers.
#[test]
fn schema_prints_the_format_for_editors() -> Result<()> {
    let out = offline(&["schema"])?;
    assert!(out.status.success(), "{out:?}");
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let job = &schema["$defs"]["JobDefinition"]["properties"];
    for field in [
        "name",
        "kind",
        "spec",
        "triggers",
        "depends_on",
        "data_time_period",
    ] {
        assert!(job.get(field).is_some(), "{field}: {job}");
    }
    Ok(())
}

/// An installation made by hand (calendars, jobs in several groups with names in any language,
/// a dependency, cron triggers in zones with a calendar, a paused trigger, an every-90 s
/// trigger) exports the same bytes twice, and what it exports is a valid definitions file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installation_made_by_hand_exports_a_stable_valid_file() -> Result<()> {
    use chime_cli::commands::services::Services;
    let mut env = chime_tests::TestEnv::new().await?;
    env.start(Services::API).await?;
    make_by_hand(&env).await?;
    let export = |args: &'static [&'static str]| {
        let env = &env;
        async move {
            let out = env.chime(args).await?;
            anyhow::ensure!(out.status.success(), "{args:?}: {out:?}");
            Ok::<_, anyhow::Error>(String::from_utf8(out.stdout)?)
        }
    };
    let first = export(&["export"]).await?;
    if std::env::var_os("CHIME_SHOW_EXPORT").is_some() {
        eprintln!("{first}");
    }
    let second = export(&["export"]).await?;
    assert_eq!(first, second, "the same store, the same bytes");
    for expected in [
        "節假日",
        "日报",
        "paused: true",
        "interval_ms: 90000",
        "Asia/Shanghai",
        "ingest.raw",
    ] {
        assert!(first.contains(expected), "{expected}: {first}");
    }
    let dir = scratch_dir("definitions-export")?;
    let file = dir.join("export.yaml");
    std::fs::write(&file, &first)?;
    let out = offline(&["validate", "-f", &file.display().to_string()])?;
    assert!(out.status.success(), "{out:?}\n{first}");
    // Planned against the store it came from, the export changes no setting: it only takes
    // over what was made by hand (each object's source). Applied, it changes nothing more; a
    // changed cron is then one change, old → new, and planning it changes nothing in the store.
    let path = file.display().to_string();
    let out = env.chime(&["plan", "-f", &path]).await?;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let settings: Vec<&str> = said.lines().filter(|l| l.starts_with("    ")).collect();
    assert!(
        !settings.is_empty()
            && settings
                .iter()
                .all(|l| *l == "    source: null → \"export.yaml\""),
        "{said}"
    );
    let out = env.chime(&["apply", "-f", &path]).await?;
    assert!(out.status.success(), "{out:?}");
    let out = env.chime(&["plan", "-f", &path]).await?;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.starts_with("No changes"),
        "{out:?}"
    );
    std::fs::write(&file, first.replace("0 0 2 * * ?", "0 30 3 * * ?"))?;
    let out = env.chime(&["plan", "-f", &path]).await?;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.contains("~ trigger default.nightly\n    schedule: ")
            && said.contains("\"cron\":\"0 0 2 * * ?\"")
            && said.contains("\"cron\":\"0 30 3 * * ?\"")
            && said.ends_with("Plan: 0 to make, 1 to change, 0 to remove.\n"),
        "{said}"
    );
    let cron: String =
        sqlx::query_scalar("SELECT schedule->>'cron' FROM triggers WHERE name = 'nightly'")
            .fetch_one(env.store.pool())
            .await?;
    assert_eq!(cron, "0 0 2 * * ?", "a plan changes nothing");
    let only = export(&["export", "--job-group", "ingest"]).await?;
    assert!(
        only.contains("name: raw") && !only.contains("日报") && !only.contains("節假日"),
        "{only}"
    );
    env.cleanup().await
}

/// An installation made by hand through the CLI: a worker group, a calendar, jobs in two groups
/// with names in any language, a dependency, cron triggers in zones (one with the calendar, one
/// paused) and an every-90 s trigger.
pub(crate) async fn make_by_hand(env: &chime_tests::TestEnv) -> Result<()> {
    let steps: [&[&str]; 9] = [
        &[
            "group",
            "create",
            "etl",
            "--description",
            "the nightly loads",
        ],
        &[
            "calendar",
            "create",
            "節假日",
            "--definition",
            r#"{"kind":"annual","excluded_days":["01-01","12-25"]}"#,
        ],
        &[
            "job",
            "create",
            "raw",
            "--group",
            "ingest",
            "--kind",
            "noop",
            "--data-time-period",
            "day",
            "--data-time-zone",
            "Asia/Shanghai",
        ],
        &[
            "job",
            "create",
            "日报",
            "--group",
            "reports",
            "--kind",
            "shell",
            "--worker-group",
            "etl",
            "--data-time-period",
            "day",
            "--data-time-zone",
            "Asia/Shanghai",
            "--",
            "./report.sh",
            "--day",
            "{{data_time}}",
        ],
        &[
            "job",
            "depend",
            "日报",
            "--group",
            "reports",
            "--on",
            "raw",
            "--on-group",
            "ingest",
        ],
        &[
            "trigger",
            "create",
            "nightly",
            "--job",
            "日报",
            "--job-group",
            "reports",
            "--cron",
            "0 0 2 * * ?",
            "--tz",
            "Asia/Shanghai",
            "--calendar",
            "節假日",
        ],
        &[
            "trigger",
            "create",
            "often",
            "--job",
            "raw",
            "--job-group",
            "ingest",
            "--every",
            "90s",
        ],
        &[
            "trigger",
            "create",
            "weekly",
            "--job",
            "raw",
            "--job-group",
            "ingest",
            "--cron",
            "0 30 6 ? * MON",
            "--tz",
            "Europe/Lisbon",
        ],
        &["trigger", "pause", "weekly"],
    ];
    for step in steps {
        let out = env.chime(step).await?;
        assert!(out.status.success(), "{step:?}: {out:?}");
    }
    Ok(())
}
