//! `chime import quartz` refuses what it cannot take, says why, and writes nothing: a database
//! that is not a Quartz store, a missing table, a live node, a zone it cannot name, an
//! unreadable blob; killed or cut off in the middle of its write, it leaves nothing either. The store here is written by hand with the columns Quartz 2.3.2's
//! PostgreSQL script makes (a store made by Quartz itself is `quartz_import`'s).

use anyhow::{Context as _, Result};
use chime_tests::TestEnv;

/// The eleven tables with their columns, as Quartz's `tables_postgres.sql` has them.
const SCHEMA: &str = "
CREATE TABLE qrtz_job_details (sched_name varchar(120), job_name varchar(200), job_group varchar(200),
  description varchar(250), job_class_name varchar(250), is_durable bool, is_nonconcurrent bool,
  is_update_data bool, requests_recovery bool, job_data bytea, PRIMARY KEY (sched_name, job_name, job_group));
CREATE TABLE qrtz_triggers (sched_name varchar(120), trigger_name varchar(200), trigger_group varchar(200),
  job_name varchar(200), job_group varchar(200), description varchar(250), next_fire_time bigint,
  prev_fire_time bigint, priority integer, trigger_state varchar(16), trigger_type varchar(8),
  start_time bigint, end_time bigint, calendar_name varchar(200), misfire_instr smallint, job_data bytea,
  PRIMARY KEY (sched_name, trigger_name, trigger_group));
CREATE TABLE qrtz_simple_triggers (sched_name varchar(120), trigger_name varchar(200), trigger_group varchar(200),
  repeat_count bigint, repeat_interval bigint, times_triggered bigint);
CREATE TABLE qrtz_cron_triggers (sched_name varchar(120), trigger_name varchar(200), trigger_group varchar(200),
  cron_expression varchar(120), time_zone_id varchar(80));
CREATE TABLE qrtz_simprop_triggers (sched_name varchar(120), trigger_name varchar(200), trigger_group varchar(200),
  str_prop_1 varchar(512), str_prop_2 varchar(512), str_prop_3 varchar(512), int_prop_1 int, int_prop_2 int,
  long_prop_1 bigint, long_prop_2 bigint, dec_prop_1 numeric(13,4), dec_prop_2 numeric(13,4),
  bool_prop_1 bool, bool_prop_2 bool);
CREATE TABLE qrtz_blob_triggers (sched_name varchar(120), trigger_name varchar(200), trigger_group varchar(200), blob_data bytea);
CREATE TABLE qrtz_calendars (sched_name varchar(120), calendar_name varchar(200), calendar bytea);
CREATE TABLE qrtz_paused_trigger_grps (sched_name varchar(120), trigger_group varchar(200));
CREATE TABLE qrtz_fired_triggers (sched_name varchar(120), entry_id varchar(95), trigger_name varchar(200),
  trigger_group varchar(200), instance_name varchar(200), fired_time bigint, sched_time bigint, priority integer,
  state varchar(16), job_name varchar(200), job_group varchar(200), is_nonconcurrent bool, requests_recovery bool);
CREATE TABLE qrtz_scheduler_state (sched_name varchar(120), instance_name varchar(200), last_checkin_time bigint,
  checkin_interval bigint);
CREATE TABLE qrtz_locks (sched_name varchar(120), lock_name varchar(40));
";

/// A job `reports.日报` of an unmapped class with a cron trigger due in 2030 (zone `zone`) and
/// an hourly simple trigger; no job data.
fn rows(zone: &str) -> String {
    format!(
        "INSERT INTO qrtz_job_details VALUES ('S', '日报', 'reports', 'daily', 'com.acme.Daily', true, false, false, false, NULL);
         INSERT INTO qrtz_triggers VALUES ('S', 'at-7', 'DEFAULT', '日报', 'reports', NULL, 1893461400000, -1, 5,
           'WAITING', 'CRON', 1577836800000, 0, NULL, 0, ''::bytea);
         INSERT INTO qrtz_cron_triggers VALUES ('S', 'at-7', 'DEFAULT', '0 0 7 * * ?', '{zone}');
         INSERT INTO qrtz_triggers VALUES ('S', 'hourly', 'DEFAULT', '日报', 'reports', NULL, 1893456000000, -1, 7,
           'PAUSED', 'SIMPLE', 1893456000000, 0, NULL, 0, NULL);
         INSERT INTO qrtz_simple_triggers VALUES ('S', 'hourly', 'DEFAULT', -1, 3600000, 0);
         INSERT INTO qrtz_locks VALUES ('S', 'TRIGGER_ACCESS');"
    )
}

/// A database of its own on the test server, with `sql` run in it; returns its URL.
async fn quartz_database(sql: &str) -> Result<(String, String)> {
    let (server, _) = chime_tests::server_urls();
    let name = format!("qz_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres")).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await?;
    admin.close().await;
    let url = format!("{server}/{name}");
    let db = sqlx::PgPool::connect(&url).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&db)
        .await?;
    db.close().await;
    Ok((url, name))
}

async fn drop_database(name: &str) -> Result<()> {
    let (server, _) = chime_tests::server_urls();
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres")).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&admin)
    .await?;
    admin.close().await;
    Ok(())
}

fn failed(out: &std::process::Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a refusal: {out:?}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "{stderr:?} should say {needle:?}"
    );
}

async fn chime_rows(env: &TestEnv) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM triggers)
              + (SELECT count(*) FROM calendars) + (SELECT count(*) FROM paused_trigger_groups)",
    )
    .fetch_one(env.store.pool())
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_imported_is_refused_by_name_and_nothing_is_written() -> Result<()> {
    let env = TestEnv::new().await?;
    let import = |url: &str, extra: &[&str]| {
        let mut args = vec![
            "import",
            "quartz",
            "--from",
            url,
            "--now",
            "2026-01-01T00:00:00Z",
        ];
        args.extend_from_slice(extra);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let env = &env;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            env.chime(&args).await
        }
    };

    // Not a Quartz store at all, then one table short.
    let (empty, empty_db) = quartz_database("SELECT 1").await?;
    failed(
        &run(import(&empty, &[])).await?,
        "not a Quartz store: no table QRTZ_JOB_DETAILS",
    );
    let (short, short_db) = quartz_database(&format!("{SCHEMA} DROP TABLE qrtz_locks;")).await?;
    failed(&run(import(&short, &[])).await?, "no table QRTZ_LOCKS");
    failed(
        &run(import(&short, &["--table-prefix", "other.QRTZ_"])).await?,
        "in schema \"other\"",
    );

    // A node that checked in a second before "now" is alive.
    let live = format!(
        "{SCHEMA} {} INSERT INTO qrtz_scheduler_state VALUES ('S', 'node-1', 1767225599000, 7500);",
        rows("Europe/Berlin")
    );
    let (live, live_db) = quartz_database(&live).await?;
    failed(
        &run(import(&live, &[])).await?,
        "Quartz node \"node-1\" of scheduler \"S\"",
    );
    // A Java-only zone it cannot name fails the trigger, naming the id; nothing is written.
    let (zoned, zoned_db) =
        quartz_database(&format!("{SCHEMA} {}", rows("Mars/Olympus_Mons"))).await?;
    let out = run(import(&zoned, &["--json"])).await?;
    failed(&out, "cannot be imported");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["failed"][0]["name"], "DEFAULT.at-7", "{report}");
    assert!(
        report["failed"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Mars/Olympus_Mons")),
        "{report}"
    );
    failed(
        &run(import(&zoned, &["--jvm-time-zone", "Europe/Narnia"])).await?,
        "--jvm-time-zone \"Europe/Narnia\"",
    );
    // An unreadable calendar blob (a truncated stream) is named; --skip-unreadable takes the rest.
    sqlx::raw_sql(
        "INSERT INTO qrtz_calendars VALUES ('S', 'broken', '\\xaced0005737200'::bytea);
         UPDATE qrtz_cron_triggers SET time_zone_id = 'IST';",
    )
    .execute(&sqlx::PgPool::connect(&zoned).await?)
    .await?;
    let out = run(import(&zoned, &["--json"])).await?;
    failed(&out, "cannot be imported");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["failed"][0]["kind"], "calendar", "{report}");
    assert_eq!(report["failed"][0]["name"], "broken", "{report}");
    assert_eq!(
        chime_rows(&env).await?,
        0,
        "a refused import wrote something"
    );

    let out = run(import(&zoned, &["--json", "--skip-unreadable"])).await?;
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["imported"]["jobs"], 1, "{report}");
    assert_eq!(report["imported"]["triggers"], 2, "{report}");
    assert_eq!(
        report["needs_mapping"][0]["class"], "com.acme.Daily",
        "{report}"
    );
    // An unmapped job comes in paused, its triggers too; `IST` is India's zone, as in Java.
    let job = chime_core::store::jobs::get(&env.store, "reports", "日报").await?;
    assert!(job.paused, "{job:?}");
    let at7 = chime_core::store::triggers::get(&env.store, "DEFAULT", "at-7", 2).await?;
    assert_eq!(at7.state, "paused");
    assert_eq!(
        at7.next_fires,
        ["2030-01-01T01:30:00.000Z", "2030-01-02T01:30:00.000Z"]
    );
    let hourly = chime_core::store::triggers::get(&env.store, "DEFAULT", "hourly", 1).await?;
    assert_eq!((hourly.state.as_str(), hourly.priority), ("paused", 7));
    // Quartz's default group is DEFAULT, chime's default: a lookup without the group says where.
    let said = chime_core::store::triggers::get(&env.store, "default", "hourly", 0)
        .await
        .map(|_| String::new())
        .unwrap_or_else(|e| e.to_string());
    assert!(
        said.contains(
            "trigger default.hourly not found; there is DEFAULT.hourly (--group \"DEFAULT\")"
        ),
        "{said}"
    );

    // Again: nothing new, everything reported as present.
    let before = chime_rows(&env).await?;
    let out = run(import(&zoned, &["--json", "--skip-unreadable"])).await?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        report["already_present"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );
    assert_eq!(chime_rows(&env).await?, before);

    for db in [empty_db, short_db, live_db, zoned_db] {
        drop_database(&db).await?;
    }
    env.cleanup().await
}

/// `--replace` gives an unmapped job its mapping and Quartz's states back, but never touches a
/// trigger chime has fired since; an imported `pauseAll()` is lifted as Quartz's `resumeAll()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_leaves_what_chime_fired_and_resume_all_lifts_pause_all() -> Result<()> {
    use chime_core::store::triggers::{self, ALL_GROUPS, Target};
    let env = TestEnv::new().await?;
    // pauseAll() as Quartz writes it: every group's row and the marker; triggers PAUSED.
    let sql = format!(
        "{SCHEMA} {}
         UPDATE qrtz_triggers SET trigger_state = 'PAUSED';
         INSERT INTO qrtz_paused_trigger_grps VALUES ('S', 'DEFAULT'), ('S', '{ALL_GROUPS}');",
        rows("Europe/Berlin")
    );
    let (url, db) = quartz_database(&sql).await?;
    let import = |extra: &[&str]| {
        let mut args = vec!["import", "quartz", "--from", &url, "--json"];
        args.extend_from_slice(extra);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let env = &env;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = env.chime(&args).await?;
            anyhow::ensure!(out.status.success(), "{out:?}");
            Ok::<serde_json::Value, anyhow::Error>(serde_json::from_slice(&out.stdout)?)
        }
    };
    let first = run(import(&[])).await?;
    assert_eq!(first["needs_mapping"][0]["job"], "reports.日报", "{first}");
    let job = chime_core::store::jobs::get(&env.store, "reports", "日报").await?;
    assert!(job.paused);

    // chime fires `hourly` once (as its scheduler would); then the mapping comes, with --replace.
    sqlx::raw_sql(
        "INSERT INTO fired_triggers (trigger_id, instance_id, sched_time)
           SELECT id, 'test', next_fire_time FROM triggers WHERE name = 'hourly';
         UPDATE triggers SET prev_fire_time = next_fire_time,
                             next_fire_time = next_fire_time + interval '1 hour',
                             times_triggered = 1
         WHERE name = 'hourly';",
    )
    .execute(env.store.pool())
    .await?;
    let again = run(import(&[
        "--replace",
        "--job-class",
        "com.acme.Daily=shell:echo daily",
    ]))
    .await?;
    assert_eq!(
        again["needs_mapping"].as_array().map(Vec::len),
        Some(0),
        "{again}"
    );
    let left = again["already_present"].to_string();
    assert!(
        left.contains("trigger DEFAULT.hourly (chime has fired it;"),
        "{again}"
    );
    let job = chime_core::store::jobs::get(&env.store, "reports", "日报").await?;
    assert!(!job.paused, "the mapped job is runnable");
    assert_eq!(job.kind, "shell");
    let hourly = triggers::get(&env.store, "DEFAULT", "hourly", 1).await?;
    assert_eq!(
        hourly.times_triggered, 1,
        "a fired trigger is left as chime has it"
    );

    // Quartz's resumeAll(): every group's pause lifted, every trigger waiting again.
    let resumed = triggers::resume(&env.store, Target::Group(ALL_GROUPS)).await?;
    assert_eq!(resumed, 2);
    let groups: i64 = sqlx::query_scalar("SELECT count(*) FROM paused_trigger_groups")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(groups, 0);
    for name in ["at-7", "hourly"] {
        assert_eq!(
            triggers::get(&env.store, "DEFAULT", name, 0).await?.state,
            "waiting"
        );
    }
    drop_database(&db).await?;
    env.cleanup().await
}

/// The import's backend in chime's store, waiting for the lock on `triggers` with rows already
/// written in its transaction (it has a transaction id): the import is in the middle of its write.
async fn import_waiting_mid_write(env: &TestEnv) -> Result<i32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let found: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND wait_event_type = 'Lock' AND backend_xid IS NOT NULL
               AND query LIKE '%INSERT INTO triggers%'",
        )
        .fetch_optional(env.store.pool())
        .await?;
        if let Some(pid) = found {
            return Ok(pid);
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "timed out waiting for the import to wait on the triggers table mid-write"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Killed with SIGKILL, or its connection to chime's store cut, in the middle of its one write
/// transaction (calendars, jobs and paused groups written, the triggers not yet), the import
/// leaves nothing in chime's store; the next run imports everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_killed_or_cut_off_mid_write_leaves_nothing_and_the_next_run_takes_all()
-> Result<()> {
    let env = TestEnv::new().await?;
    let (url, db) = quartz_database(&format!("{SCHEMA} {}", rows("Europe/Berlin"))).await?;
    let args = [
        "import",
        "quartz",
        "--from",
        url.as_str(),
        "--now",
        "2026-01-01T00:00:00Z",
        "--json",
    ];
    for cut in [false, true] {
        // Holding `triggers` stops the import after its first writes, inside its transaction.
        let mut blocker = env.store.pool().begin().await?;
        // The store's sessions end an idle transaction after 5 s; this one must outlive a slow
        // import's start.
        sqlx::query("SET LOCAL idle_in_transaction_session_timeout = 0")
            .execute(&mut *blocker)
            .await?;
        sqlx::query("LOCK TABLE triggers IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *blocker)
            .await?;
        let mut import = env
            .chime_command(&args)?
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let backend = import_waiting_mid_write(&env).await?;
        if cut {
            // PostgreSQL ends the session, as a crash or a network cut would.
            sqlx::query("SELECT pg_terminate_backend($1)")
                .bind(backend)
                .execute(env.store.pool())
                .await?;
        } else {
            import.start_kill()?;
        }
        let out = import.wait_with_output().await?;
        assert!(!out.status.success(), "cut={cut}: {out:?}");
        if cut {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr
                    .lines()
                    .any(|l| l.starts_with("error: writing the triggers: ")),
                "{stderr}"
            );
        }
        blocker.rollback().await?;
        // The killed import's session ends once PostgreSQL finds its client gone.
        chime_tests::eventually("the import's session to end", || async {
            let alive: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                    .bind(backend)
                    .fetch_one(env.store.pool())
                    .await?;
            Ok(!alive)
        })
        .await?;
        assert_eq!(
            chime_rows(&env).await?,
            0,
            "cut={cut}: an import stopped mid-write left rows"
        );
    }
    let out = env.chime(&args).await?;
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["imported"]["jobs"], 1, "{report}");
    assert_eq!(report["imported"]["triggers"], 2, "{report}");
    assert_eq!(
        report["already_present"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    drop_database(&db).await?;
    env.cleanup().await
}

/// Runs `chime ARGS` on `env`'s store and returns its output with its peak resident memory in
/// KiB, measured by `peak-rss` (this binary's own children start from its size, not theirs).
fn chime_measured(env: &TestEnv, args: &[&str]) -> Result<(std::process::Output, i64)> {
    let report = std::env::temp_dir().join(format!("chime-peak-{}", uuid::Uuid::now_v7()));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_peak-rss"))
        .arg(&report)
        .arg(chime_tests::chime_binary()?)
        .args(args)
        .env("CHIME_DATABASE_URL", &env.settings.database_url)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .env_remove("DATABASE_URL")
        .output()?;
    let peak = std::fs::read_to_string(&report)
        .with_context(|| format!("peak-rss wrote no report: {output:?}"))?;
    let _ = std::fs::remove_file(&report);
    Ok((output, peak.trim().parse()?))
}

/// A hostile store of 16 MB: 200 jobs whose 72 KB maps each share one 60,000-character string
/// under 1,000 keys (60 MB of text apiece once expanded), a 2 MB blob, and a name chime refuses.
/// The import reads it in bounded memory, names each of those as unreadable and exits non-zero;
/// `--skip-unreadable` takes the rest; `--max-blob-bytes` lets the large blob in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_store_is_read_in_bounded_memory_and_what_it_refuses_is_named() -> Result<()> {
    let env = TestEnv::new().await?;
    let sharing: &[u8] =
        include_bytes!("../../../services/quartz-import/fixtures/jobdata_sharing.ser");
    let (url, db) = quartz_database(&format!(
        "{SCHEMA}
         INSERT INTO qrtz_job_details VALUES ('S', 'ok', 'reports', NULL, 'com.acme.Ok', true,
           false, false, false, NULL);
         INSERT INTO qrtz_job_details VALUES ('S', 'bad' || chr(8203) || 'name', 'reports', NULL,
           'com.acme.Ok', true, false, false, false, NULL);
         INSERT INTO qrtz_job_details VALUES ('S', 'huge', 'hostile', NULL, 'com.acme.Ok', true,
           false, false, false, convert_to('big=' || repeat('x', 2097148), 'UTF8'));
         INSERT INTO qrtz_locks VALUES ('S', 'TRIGGER_ACCESS');"
    ))
    .await?;
    let quartz = sqlx::PgPool::connect(&url).await?;
    sqlx::query(
        "INSERT INTO qrtz_job_details SELECT 'S', 'shared' || i, 'hostile', NULL, 'com.acme.Ok',
           true, false, false, false, $1 FROM generate_series(1, 200) i",
    )
    .bind(sharing)
    .execute(&quartz)
    .await?;
    let size: i64 =
        sqlx::query_scalar("SELECT sum(octet_length(job_data))::int8 FROM qrtz_job_details")
            .fetch_one(&quartz)
            .await?;
    quartz.close().await;
    assert!(size > 15_000_000, "the store holds {size} bytes of blobs");

    let import = [
        "import",
        "quartz",
        "--from",
        &url,
        "--now",
        "2026-01-01T00:00:00Z",
    ];
    let (out, peak_kib) = chime_measured(&env, &[&import[..], &["--json"]].concat())?;
    failed(&out, "202 item(s) cannot be imported");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let failed_items = report["failed"].as_array().cloned().unwrap_or_default();
    let reason = |name: &str| {
        failed_items
            .iter()
            .find(|i| i["name"] == name)
            .and_then(|i| i["reason"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        reason("hostile.huge").contains("JOB_DATA is 2097152 bytes, over the limit of 1048576"),
        "{report}"
    );
    assert!(
        reason("hostile.shared7").contains("expands to more than"),
        "{report}"
    );
    assert!(
        reason("reports.bad\u{200b}name").contains("U+200B"),
        "{report}"
    );
    assert_eq!(
        chime_rows(&env).await?,
        0,
        "a refused import wrote something"
    );
    assert!(peak_kib < 200 * 1024, "the import peaked at {peak_kib} KiB");

    let (out, peak_kib) = chime_measured(
        &env,
        &[&import[..], &["--json", "--skip-unreadable"]].concat(),
    )?;
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["imported"]["jobs"], 1, "{report}");
    assert!(peak_kib < 200 * 1024, "the import peaked at {peak_kib} KiB");

    let (out, _) = chime_measured(
        &env,
        &[
            &import[..],
            &["--json", "--dry-run", "--max-blob-bytes", "3000000"],
        ]
        .concat(),
    )?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert!(
        !report["failed"]
            .as_array()
            .is_some_and(|f| f.iter().any(|i| i["name"] == "hostile.huge")),
        "{report}"
    );
    drop_database(&db).await?;
    env.cleanup().await
}
