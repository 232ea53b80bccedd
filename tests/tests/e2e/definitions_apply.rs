//! Definitions as code: `chime apply` of files in one transaction, its dry run, its prune of
//! its own source, and the pause an operator made surviving the next apply.

use std::process::Output;

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_tests::{TestEnv, scratch_dir};

use crate::definitions::{make_by_hand, write};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn exported(env: &TestEnv) -> Result<String> {
    let out = env.chime(&["export"]).await?;
    anyhow::ensure!(out.status.success(), "{out:?}");
    Ok(stdout(&out))
}

/// Each trigger's next fire, by group and name.
async fn next_fires(env: &TestEnv) -> Result<Vec<(String, String, jiff_sqlx::Timestamp)>> {
    Ok(sqlx::query_as(
        "SELECT group_name, name, next_fire_time FROM triggers ORDER BY group_name, name",
    )
    .fetch_all(env.store.pool())
    .await?)
}

/// An installation made by hand exports, applies to an empty store, and that store exports
/// the same bytes, with the same next fires (an interval's in the same phase: the export
/// carries the start it counts from).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_applied_to_an_empty_store_makes_the_same_store() -> Result<()> {
    let mut made = TestEnv::new().await?;
    made.start(Services::API).await?;
    make_by_hand(&made).await?;
    let export = exported(&made).await?;
    let dir = scratch_dir("definitions-roundtrip")?;
    let file = dir.join("export.yaml");
    std::fs::write(&file, &export)?;

    let mut empty = TestEnv::new().await?;
    empty.start(Services::API).await?;
    let path = file.display().to_string();
    let out = empty.chime(&["apply", "-f", &path]).await?;
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("Plan: 8 to make, 0 to change, 0 to remove."),
        "{out:?}"
    );
    assert_eq!(
        exported(&empty).await?,
        export,
        "the applied store exports the same"
    );

    let (before, after) = (next_fires(&made).await?, next_fires(&empty).await?);
    assert_eq!(before.len(), 3);
    for ((group, name, was), (_, _, is)) in before.iter().zip(&after) {
        let (was, is) = (was.to_jiff(), is.to_jiff());
        if name == "often" {
            let apart = is.duration_since(was).as_millis();
            assert_eq!(
                apart.rem_euclid(90_000),
                0,
                "{group}.{name}: {was} and {is}"
            );
        } else {
            assert_eq!(was, is, "{group}.{name}");
        }
    }
    // The paused trigger came paused; the applied objects name their source.
    let paused: String = sqlx::query_scalar("SELECT state FROM triggers WHERE name = 'weekly'")
        .fetch_one(empty.store.pool())
        .await?;
    assert_eq!(paused, "paused");
    let source: Option<String> = sqlx::query_scalar("SELECT source FROM jobs WHERE name = '日报'")
        .fetch_one(empty.store.pool())
        .await?;
    assert_eq!(source.as_deref(), Some("export.yaml"));

    let out = empty.chime(&["apply", "-f", &path]).await?;
    assert!(
        out.status.success() && stdout(&out).starts_with("No changes"),
        "a second apply changes nothing: {out:?}"
    );
    made.cleanup().await?;
    empty.cleanup().await
}

const JOBS: &str = r#"jobs:
  - name: load
    kind: noop
    triggers:
      - name: load-nightly
        schedule: {kind: cron, cron: "0 0 2 * * ?", time_zone: Europe/Paris}
  - name: report
    kind: noop
    triggers:
      - name: report-hourly
        schedule: {kind: cron, cron: "0 0 * * * ?"}
"#;

async fn cron_of(env: &TestEnv, trigger: &str) -> Result<String> {
    Ok(
        sqlx::query_scalar("SELECT schedule->>'cron' FROM triggers WHERE name = $1")
            .bind(trigger)
            .fetch_one(env.store.pool())
            .await?,
    )
}

async fn jobs(env: &TestEnv) -> Result<Vec<String>> {
    Ok(
        sqlx::query_scalar("SELECT name FROM jobs ORDER BY name COLLATE \"C\"")
            .fetch_all(env.store.pool())
            .await?,
    )
}

async fn state_of(env: &TestEnv, trigger: &str) -> Result<String> {
    Ok(
        sqlx::query_scalar("SELECT state FROM triggers WHERE name = $1")
            .bind(trigger)
            .fetch_one(env.store.pool())
            .await?,
    )
}

/// The workflow a team runs: apply a directory; a changed cron shows in `--dry-run` (old → new,
/// the store unchanged, `--exit-code` 3) and `apply` makes it; a job left out of the files is
/// pruned while a job made by hand stays; a bad cron among good changes, or a change the store
/// refuses, fails naming the file and line and changes nothing; an operator's pause outlives
/// the next apply, and a pause changed in the files is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_plans_prunes_its_own_and_changes_nothing_on_an_error() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let dir = scratch_dir("definitions-apply")?;
    let root = dir.join("chime");
    let chime = root.display().to_string();
    write(&root, "jobs.yaml", JOBS)?;
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert!(out.status.success(), "{out:?}");
    env.chime_ok(&["job", "create", "manual", "--kind", "noop"])
        .await?;
    // Each job says where it came from.
    let shown = stdout(&env.chime(&["job", "show", "load"]).await?);
    assert!(
        shown.contains("chime (chime apply: edits made by hand are overwritten"),
        "{shown}"
    );
    let shown = stdout(&env.chime(&["job", "show", "manual"]).await?);
    assert!(shown.contains("made by hand"), "{shown}");

    // A changed cron: planned, not made; then made.
    write(
        &root,
        "jobs.yaml",
        &JOBS.replace("0 0 2 * * ?", "0 30 3 * * ?"),
    )?;
    let out = env
        .chime(&["apply", "-f", &chime, "--dry-run", "--exit-code"])
        .await?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let plan = stdout(&out);
    assert!(
        plan.contains("~ trigger default.load-nightly\n    schedule: ")
            && plan.contains("0 0 2 * * ?")
            && plan.contains("0 30 3 * * ?")
            && plan.contains("Plan: 0 to make, 1 to change, 0 to remove."),
        "{plan}"
    );
    assert_eq!(cron_of(&env, "load-nightly").await?, "0 0 2 * * ?");
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(cron_of(&env, "load-nightly").await?, "0 30 3 * * ?");
    let out = env.chime(&["apply", "-f", &chime, "--exit-code"]).await?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "nothing left to change: {out:?}"
    );
    // A trigger that has fired its last time is still the files' trigger: left as it is.
    sqlx::query("UPDATE triggers SET state = 'complete' WHERE name = 'report-hourly'")
        .execute(env.store.pool())
        .await?;
    let out = env.chime(&["apply", "-f", &chime, "--exit-code"]).await?;
    assert_eq!(out.status.code(), Some(0), "a complete trigger: {out:?}");
    sqlx::query("UPDATE triggers SET state = 'waiting' WHERE name = 'report-hourly'")
        .execute(env.store.pool())
        .await?;

    // Every change is in the audit trail with its source.
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_events
         WHERE source = 'chime' AND object = 'trigger default.load-nightly'",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(audited, 2, "made, then its cron changed");

    // A bad cron among good changes: refused at its line, nothing made.
    let bad = JOBS
        .replace("0 0 2 * * ?", "0 30 3 * * ?")
        .replace("0 0 * * * ?", "0 0 25 * * ?")
        + "  - name: extra\n    kind: noop\n";
    write(&root, "jobs.yaml", &bad)?;
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let file = root.join("jobs.yaml").display().to_string();
    assert!(
        stderr(&out).contains(&format!("{file}:11:")) && stderr(&out).contains("cron"),
        "{out:?}"
    );
    assert_eq!(jobs(&env).await?, ["load", "manual", "report"]);

    // A change only the store can refuse (a worker group it does not have) fails at the job's
    // line, and the good change made before it in the same apply is rolled back.
    let refused = JOBS.replace("0 0 2 * * ?", "0 30 3 * * ?")
        + "  - name: extra\n    kind: noop\n  - name: lost\n    kind: noop\n    worker_group: nowhere\n";
    write(&root, "jobs.yaml", &refused)?;
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains(&format!("{file}:14:"))
            && stderr(&out).contains("job default.lost")
            && stderr(&out).contains("nowhere")
            && stderr(&out).contains("nothing was changed"),
        "{out:?}"
    );
    assert_eq!(jobs(&env).await?, ["load", "manual", "report"]);

    // The report job leaves the files: kept by a plain apply, pruned by --prune; the job made
    // by hand stays.
    let changed = JOBS.replace("0 0 2 * * ?", "0 30 3 * * ?");
    let mine = &changed[..changed.find("  - name: report").unwrap_or(0)];
    write(&root, "jobs.yaml", mine)?;
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert!(stdout(&out).starts_with("No changes"), "{out:?}");
    // A trigger made by hand on the job would go with it: the prune refuses, naming it.
    env.chime_ok(&[
        "trigger", "create", "by-hand", "--job", "report", "--every", "1h",
    ])
    .await?;
    let out = env.chime(&["apply", "-f", &chime, "--prune"]).await?;
    assert!(
        !out.status.success() && stderr(&out).contains("default.by-hand"),
        "{out:?}"
    );
    assert_eq!(jobs(&env).await?, ["load", "manual", "report"]);
    let out = env
        .chime(&["apply", "-f", &chime, "--prune", "--force"])
        .await?;
    assert!(out.status.success(), "{out:?}");
    let said = stdout(&out);
    assert!(
        said.contains("- trigger default.report-hourly\n")
            && said.contains("- job default.report\n"),
        "{said}"
    );
    assert_eq!(jobs(&env).await?, ["load", "manual"]);

    // An operator pauses the trigger: the next apply keeps the pause. Paused in the files, then
    // resumed there, each change is applied; resumed by hand meanwhile, it stays resumed.
    env.chime_ok(&["trigger", "pause", "load-nightly"]).await?;
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert!(stdout(&out).starts_with("No changes"), "{out:?}");
    assert_eq!(state_of(&env, "load-nightly").await?, "paused");
    env.chime_ok(&["trigger", "resume", "load-nightly"]).await?;
    write(
        &root,
        "jobs.yaml",
        &mine.replace("Europe/Paris}", "Europe/Paris}\n        paused: true"),
    )?;
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert!(stdout(&out).contains("paused: false → true"), "{out:?}");
    assert_eq!(state_of(&env, "load-nightly").await?, "paused");
    env.chime_ok(&["trigger", "resume", "load-nightly"]).await?;
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert!(stdout(&out).starts_with("No changes"), "{out:?}");
    assert_eq!(state_of(&env, "load-nightly").await?, "waiting");
    env.cleanup().await
}

/// A directory of 1,000 jobs (each with a trigger, a tenth depending on another) applies in one
/// transaction, and a second apply plans no change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_jobs_apply_and_then_plan_no_change() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let dir = scratch_dir("definitions-thousand")?;
    let root = dir.join("chime");
    for file in 0..10 {
        let mut text = String::from("jobs:\n");
        for n in 0..100 {
            let i = file * 100 + n;
            text.push_str(&format!(
                "  - name: job-{i}\n    group: team-{file}\n    kind: noop\n    \
                 data_time_period: hour\n    triggers:\n      - name: t-{i}\n        \
                 schedule: {{kind: cron, cron: \"0 {} * * * ?\", time_zone: Asia/Tokyo}}\n",
                i % 60
            ));
            if n % 10 == 1 {
                text.push_str(&format!(
                    "    depends_on:\n      - job: team-{file}.job-{}\n",
                    i - 1
                ));
            }
        }
        write(&root, &format!("team-{file}.yaml"), &text)?;
    }
    let chime = root.display().to_string();
    let out = env.chime(&["apply", "-f", &chime]).await?;
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("Plan: 2100 to make, 0 to change, 0 to remove."),
        "{}",
        stdout(&out).lines().last().unwrap_or_default()
    );
    let out = env.chime(&["apply", "-f", &chime, "--dry-run"]).await?;
    assert!(stdout(&out).starts_with("No changes"), "{out:?}");
    env.cleanup().await
}
