//! `chime import quartz` against a store made by Quartz 2.3.2 itself.
//!
//! The Java programs in `tests/quartz-import/` (see its README) build a real Quartz JDBC store
//! with Quartz's own API (`MakeStore`: three schedulers, two table prefixes, a clustered node
//! halted mid-job) and print what Quartz itself makes of it (`Oracle`: each trigger's next 25
//! fire times, misfire handling included, each job's data in chime's JSON mapping, the paused
//! groups). This test imports each scheduler with the `chime` binary and holds chime's store to
//! Quartz's answers, to the millisecond. It needs `javac`, `java` and Debian's Quartz and JDBC
//! jars; without them it says so and passes, unless `CHIME_REQUIRE_QUARTZ=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use chime_core::store::{StoreError, jobs, triggers};
use chime_tests::{TestEnv, scratch_dir, server_urls};
use jiff::Timestamp;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

/// What the Java programs need, as Debian's libquartz2-java and libpostgresql-jdbc-java install
/// them.
pub(crate) const JARS: [&str; 4] = [
    "/usr/share/java/quartz2.jar",
    "/usr/share/java/postgresql.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// The zone the Quartz JVMs run in (`-Duser.timezone`), and so `--jvm-time-zone`.
pub(crate) const JVM_ZONE: &str = "Europe/Berlin";

/// How many fire times are compared per trigger.
const FIRES: usize = 25;

/// How far apart "now" may be for Quartz and chime when a misfire policy fires "now": the
/// oracle's clock runs on while it computes, chime's `--now` is the oracle's first reading.
const NOW_SLACK_MS: i64 = 5_000;

/// The Java job classes and what chime runs for each.
const JOB_CLASSES: [&str; 4] = [
    "qzfixture.NoopJob=shell:true",
    "qzfixture.NonConcurrentJob=shell:true",
    "qzfixture.PojoJob=shell:true",
    "qzfixture.BlockingJob=http:http://127.0.0.1:9/recover",
];

/// One Quartz scheduler of the fixture and how it is imported.
struct Scheduler {
    name: &'static str,
    prefix: &'static str,
    /// Flags its imports need besides the common ones.
    flags: Vec<String>,
}

/// Whether the test can run here; `Err` when it must but cannot.
pub(crate) fn quartz_available() -> Result<bool> {
    let mut missing = Vec::new();
    for tool in ["javac", "java"] {
        let ok = std::process::Command::new(tool)
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            missing.push(tool.to_string());
        }
    }
    missing.extend(
        JARS.iter()
            .filter(|jar| !Path::new(jar).exists())
            .map(|jar| jar.to_string()),
    );
    if missing.is_empty() {
        return Ok(true);
    }
    let why = format!(
        "the Quartz import test needs {} (apt-get install default-jdk-headless libquartz2-java \
         libpostgresql-jdbc-java libslf4j-java)",
        missing.join(", ")
    );
    if std::env::var("CHIME_REQUIRE_QUARTZ").as_deref() == Ok("1") {
        bail!("{why}; CHIME_REQUIRE_QUARTZ=1 requires it");
    }
    eprintln!("SKIPPED: {why}");
    Ok(false)
}

/// The test server's address for JDBC: (`jdbc:postgresql://host:port/`, user, password).
fn jdbc_server(server: &str) -> Result<(String, String, Option<String>)> {
    let rest = server
        .split_once("://")
        .map(|(_, rest)| rest)
        .context("the test server URL has no scheme")?;
    let rest = rest.split(['/', '?']).next().unwrap_or(rest);
    let (user, password, host) = match rest.rsplit_once('@') {
        Some((info, host)) => match info.split_once(':') {
            Some((user, password)) => (user.to_string(), Some(password.to_string()), host),
            None => (info.to_string(), None, host),
        },
        None => (
            std::env::var("USER").unwrap_or_else(|_| "postgres".into()),
            None,
            rest,
        ),
    };
    Ok((format!("jdbc:postgresql://{host}/"), user, password))
}

/// The fixture's source database and what is needed to drive the Java programs against it.
struct Fixture {
    server: String,
    source: String,
    classes: PathBuf,
    jdbc: String,
    user: String,
    password: Option<String>,
    /// Databases to drop at the end.
    made: Vec<String>,
}

impl Fixture {
    fn url(&self, database: &str) -> String {
        format!("{}/{database}", self.server)
    }

    async fn admin(&self) -> Result<PgConnection> {
        Ok(PgConnection::connect(&self.url("postgres")).await?)
    }

    /// Creates `name` (as a copy of `template`, if given: PostgreSQL refuses while anyone is
    /// connected to the template, such as the backends of a JVM that was just halted, so it is
    /// retried for a while).
    async fn create_database(&mut self, name: &str, template: Option<&str>) -> Result<()> {
        let mut admin = self.admin().await?;
        let sql = match template {
            Some(t) => format!("CREATE DATABASE \"{name}\" TEMPLATE \"{t}\""),
            None => format!("CREATE DATABASE \"{name}\""),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&mut admin)
                .await
            {
                Ok(_) => break,
                Err(e) if Instant::now() < deadline && e.to_string().contains("being accessed") => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e).with_context(|| format!("creating database {name}")),
            }
        }
        self.made.push(name.to_string());
        admin.close().await?;
        Ok(())
    }

    async fn drop_databases(&self) -> Result<()> {
        let mut admin = self.admin().await?;
        for name in &self.made {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await?;
        }
        admin.close().await?;
        Ok(())
    }

    /// Runs `qzfixture.MAIN` on `database` in the Quartz nodes' zone.
    async fn java(&self, main: &str, database: &str) -> Result<Output> {
        let mut classpath = vec![self.classes.display().to_string()];
        classpath.extend(JARS.iter().map(|j| j.to_string()));
        let mut command = tokio::process::Command::new("java");
        command
            .arg(format!("-Duser.timezone={JVM_ZONE}"))
            .arg("-cp")
            .arg(classpath.join(":"))
            .arg(format!("qzfixture.{main}"))
            .arg(format!("{}{database}", self.jdbc))
            .arg(&self.user)
            .args(self.password.iter())
            .kill_on_drop(true);
        let output = tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .with_context(|| format!("{main} did not end within 60 s"))??;
        ensure!(
            output.status.success(),
            "{main} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(output)
    }
}

/// Compiles the Java sources into `dir`/classes; returns that directory.
pub(crate) async fn compile(dir: &Path) -> Result<PathBuf> {
    let sources_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("quartz-import");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&sources_dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    sources.retain(|p| p.extension().is_some_and(|e| e == "java"));
    sources.sort();
    let classes = dir.join("classes");
    std::fs::create_dir_all(&classes)?;
    let output = tokio::process::Command::new("javac")
        .args(["-encoding", "UTF-8", "-nowarn", "-d"])
        .arg(&classes)
        .arg("-cp")
        .arg(JARS.join(":"))
        .args(&sources)
        .kill_on_drop(true)
        .output()
        .await?;
    ensure!(
        output.status.success(),
        "javac failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(classes)
}

/// An md5 of every row of every table of the two Quartz stores (`qrtz_*`, `chime_t_*`).
async fn source_checksums(url: &str) -> Result<BTreeMap<String, String>> {
    let mut conn = PgConnection::connect(url).await?;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public'
           AND (table_name LIKE 'qrtz\\_%' OR table_name LIKE 'chime\\_t\\_%')
         ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await?;
    ensure!(
        tables.len() == 22,
        "expected 2 × 11 Quartz tables, found {tables:?}"
    );
    let sums = table_checksums(&mut conn, &tables).await?;
    conn.close().await?;
    Ok(sums)
}

async fn table_checksums(
    conn: &mut PgConnection,
    tables: &[String],
) -> Result<BTreeMap<String, String>> {
    let mut sums = BTreeMap::new();
    for table in tables {
        let sum: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \"{table}\" t"
        )))
        .fetch_one(&mut *conn)
        .await?;
        sums.insert(table.clone(), sum);
    }
    Ok(sums)
}

/// An md5 of each of chime's tables an import writes.
async fn chime_checksums(env: &TestEnv) -> Result<BTreeMap<String, String>> {
    let mut conn = env.store.pool().acquire().await?;
    let tables = ["calendars", "jobs", "triggers", "paused_trigger_groups"].map(String::from);
    table_checksums(&mut conn, &tables).await
}

async fn chime_counts(env: &TestEnv) -> Result<Vec<i64>> {
    let mut counts = Vec::new();
    for table in ["calendars", "jobs", "triggers", "paused_trigger_groups"] {
        counts.push(
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                .fetch_one(env.store.pool())
                .await?,
        );
    }
    Ok(counts)
}

/// `chime import quartz --from SOURCE --scheduler NAME ARGS…`.
async fn import(
    env: &TestEnv,
    from: &str,
    scheduler: &Scheduler,
    args: &[String],
) -> Result<Output> {
    let mut all: Vec<String> = vec![
        "import".into(),
        "quartz".into(),
        "--from".into(),
        from.into(),
        "--scheduler".into(),
        scheduler.name.into(),
        "--table-prefix".into(),
        scheduler.prefix.into(),
    ];
    all.extend(scheduler.flags.iter().cloned());
    all.extend(args.iter().cloned());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    env.chime(&all).await
}

fn report(output: &Output) -> Result<Value> {
    serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "the import printed no JSON report: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn ok_report(output: &Output) -> Result<Value> {
    ensure!(
        output.status.success(),
        "the import failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    report(output)
}

/// The oracle's lines of one type.
fn of_type<'a>(lines: &'a [&'a Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    lines.iter().copied().filter(move |l| l["type"] == kind)
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

/// chime's misfire policy for Quartz's instruction `code` of a trigger of type `kind`.
fn policy(kind: &str, code: i64) -> &'static str {
    match (kind == "SIMPLE", code) {
        (_, -1) => "fire_all",
        (_, 0) => "smart",
        (_, 1) => "fire_now",
        (true, 2) => "reschedule_now_with_existing_count",
        (false, 2) => "skip",
        (true, 3) => "reschedule_now_with_remaining_count",
        (true, 4) => "reschedule_next_with_remaining_count",
        (true, 5) => "reschedule_next_with_existing_count",
        _ => "(not a Quartz instruction)",
    }
}

fn millis(fires: &[String]) -> Result<Vec<i64>> {
    fires
        .iter()
        .map(|f| Ok(f.parse::<Timestamp>()?.as_millisecond()))
        .collect()
}

fn show(ms: &[i64]) -> String {
    ms.iter()
        .map(|m| {
            Timestamp::from_millisecond(*m)
                .map(|t| format!("{t:.3}"))
                .unwrap_or_else(|_| m.to_string())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Compares chime's next fire times with Quartz's; `effect` is the oracle's: "now_all" (a
/// simple trigger restarted "now": every fire shifted by the two clocks' difference),
/// "now_first" (fired once "now", then the schedule's own times) or exact.
fn compare_fires(effect: &str, quartz: &[i64], chime: &[i64]) -> Option<String> {
    let mismatch = || {
        Some(format!(
            "fires differ ({effect})\n      quartz: {}\n      chime:  {}",
            show(quartz),
            show(chime)
        ))
    };
    if quartz.len() != chime.len() {
        return mismatch();
    }
    match effect {
        "now_all" | "now_first" if !quartz.is_empty() => {
            let offset = chime[0] - quartz[0];
            if offset.abs() >= NOW_SLACK_MS {
                return mismatch();
            }
            let rest_offset = if effect == "now_all" { offset } else { 0 };
            let rest_ok = quartz
                .iter()
                .zip(chime)
                .skip(1)
                .all(|(q, c)| c - q == rest_offset);
            if rest_ok { None } else { mismatch() }
        }
        _ if quartz == chime => None,
        _ => mismatch(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quartz_store_imports_as_quartz_itself_computes_it() -> Result<()> {
    if !quartz_available()? {
        return Ok(());
    }
    let started = Instant::now();
    let server = server_urls().0;
    let (jdbc, user, password) = jdbc_server(&server)?;
    let scratch = scratch_dir("quartz-import")?;
    let id = uuid::Uuid::now_v7().simple().to_string();
    let source = format!("qz_{}", &id[id.len() - 12..]);
    let mut fixture = Fixture {
        server,
        source: source.clone(),
        classes: compile(&scratch).await?,
        jdbc,
        user,
        password,
        made: Vec::new(),
    };
    fixture.create_database(&source, None).await?;
    let outcome = run(&mut fixture).await;
    let dropped = fixture.drop_databases().await;
    let _ = std::fs::remove_dir_all(&scratch);
    outcome?;
    dropped?;
    eprintln!("quartz import test took {:.1?}", started.elapsed());
    Ok(())
}

async fn run(fixture: &mut Fixture) -> Result<()> {
    let source_url = fixture.url(&fixture.source);
    fixture.java("MakeStore", &fixture.source).await?;
    let made = source_checksums(&source_url).await?;

    let oracle = fixture.java("Oracle", &fixture.source).await?;
    let lines: Vec<Value> = String::from_utf8(oracle.stdout)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("the oracle printed a line that is not JSON")?;
    ensure!(
        source_checksums(&source_url).await? == made,
        "the oracle (Quartz, never started) changed the source store"
    );
    let t0 = lines
        .iter()
        .find(|l| l["type"] == "trigger")
        .and_then(|l| l["now_ms"].as_i64())
        .context("the oracle printed no trigger")?;
    let now = format!("{:.3}", Timestamp::from_millisecond(t0)?);

    // schedA's node was halted seconds ago: its check-in may still look alive at T0.
    let mut conn = PgConnection::connect(&source_url).await?;
    let (checkin, interval): (i64, i64) = sqlx::query_as(
        "SELECT last_checkin_time, checkin_interval FROM qrtz_scheduler_state
         WHERE sched_name = 'schedA'",
    )
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    let a_fresh = t0 - checkin < interval + 7_500;

    let schedulers = [
        Scheduler {
            name: "schedD",
            prefix: "QRTZ_",
            flags: vec!["--skip-unreadable".into()],
        },
        Scheduler {
            name: "schedB",
            prefix: "CHIME_T_",
            flags: Vec::new(),
        },
        Scheduler {
            name: "schedA",
            prefix: "QRTZ_",
            flags: if a_fresh {
                vec!["--force".into()]
            } else {
                Vec::new()
            },
        },
    ];
    let mut common: Vec<String> = vec![
        "--jvm-time-zone".into(),
        JVM_ZONE.into(),
        "--now".into(),
        now,
        "--json".into(),
    ];
    for class in JOB_CLASSES {
        common.push("--job-class".into());
        common.push(class.into());
    }

    let mut problems = Vec::new();
    for scheduler in &schedulers {
        let env = TestEnv::new().await?;
        let outcome =
            check_scheduler(fixture, &env, scheduler, &common, &lines, &mut problems).await;
        env.cleanup().await?;
        outcome.with_context(|| format!("importing {}", scheduler.name))?;
    }

    check_live_node_refused(fixture).await?;

    ensure!(
        source_checksums(&source_url).await? == made,
        "an import changed the Quartz store it read"
    );
    ensure!(
        problems.is_empty(),
        "chime's import differs from Quartz in {} place(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    Ok(())
}

/// A copy of the store whose node checked in just now: the import must refuse it, naming the
/// node, unless forced.
async fn check_live_node_refused(fixture: &mut Fixture) -> Result<()> {
    let copy = format!("{}_live", fixture.source);
    let source = fixture.source.clone();
    fixture.create_database(&copy, Some(&source)).await?;
    let mut conn = PgConnection::connect(&fixture.url(&copy)).await?;
    let now_ms = Timestamp::now().as_millisecond();
    let instance: String = sqlx::query_scalar(
        "UPDATE qrtz_scheduler_state SET last_checkin_time = $1
         WHERE sched_name = 'schedA' RETURNING instance_name",
    )
    .bind(now_ms)
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    let env = TestEnv::new().await?;
    let outcome = async {
        let scheduler = Scheduler {
            name: "schedA",
            prefix: "QRTZ_",
            flags: Vec::new(),
        };
        let mut args = vec!["--jvm-time-zone".to_string(), JVM_ZONE.into()];
        for class in JOB_CLASSES {
            args.push("--job-class".into());
            args.push(class.into());
        }
        let out = import(&env, &fixture.url(&copy), &scheduler, &args).await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            !out.status.success() && stderr.contains(&instance) && stderr.contains("--force"),
            "the import of a store whose node {instance} checked in just now should be refused, \
             naming it: {out:?}"
        );
        ensure!(
            chime_counts(&env).await? == vec![0, 0, 0, 0],
            "a refused import wrote"
        );
        args.extend(["--force".into(), "--dry-run".into()]);
        let forced = import(&env, &fixture.url(&copy), &scheduler, &args).await?;
        ensure!(
            forced.status.success(),
            "--force should read a store whose node checked in just now: {forced:?}"
        );
        Ok(())
    }
    .await;
    env.cleanup().await?;
    outcome
}

async fn check_scheduler(
    fixture: &Fixture,
    env: &TestEnv,
    scheduler: &Scheduler,
    common: &[String],
    lines: &[Value],
    problems: &mut Vec<String>,
) -> Result<()> {
    let from = fixture.url(&fixture.source);
    let name = scheduler.name;
    let mine: Vec<&Value> = lines.iter().filter(|l| l["scheduler"] == name).collect();

    // A dry run reports and writes nothing.
    let mut dry = common.to_vec();
    dry.push("--dry-run".into());
    let dry_report = ok_report(&import(env, &from, scheduler, &dry).await?)?;
    ensure!(
        dry_report["dry_run"] == true,
        "{name}: not reported as a dry run"
    );
    ensure!(
        chime_counts(env).await? == vec![0, 0, 0, 0],
        "{name}: the dry run wrote to chime's store"
    );

    // A job chime cannot read stops the import unless --skip-unreadable.
    let unreadable: Vec<&Value> = of_type(&mine, "job")
        .filter(|j| j["unreadable"] == true)
        .collect();
    if !unreadable.is_empty() {
        let strict = Scheduler {
            name: scheduler.name,
            prefix: scheduler.prefix,
            flags: Vec::new(),
        };
        let out = import(env, &from, &strict, common).await?;
        ensure!(
            !out.status.success(),
            "{name}: imported without --skip-unreadable although a job cannot be read"
        );
        let refused = report(&out)?;
        for job in &unreadable {
            let key = format!("{}.{}", text(job, "group"), text(job, "name"));
            let named = refused["failed"].as_array().is_some_and(|failed| {
                failed.iter().any(|f| {
                    f["kind"] == "job"
                        && f["name"] == key.as_str()
                        && text(f, "reason").contains(&format!("{:?}", text(job, "unreadable_key")))
                        && text(f, "reason").contains(&text(job, "unreadable_class"))
                })
            });
            ensure!(
                named,
                "{name}: the report should name job {key}, key {} and class {}: {}",
                job["unreadable_key"],
                job["unreadable_class"],
                refused["failed"]
            );
        }
        ensure!(
            chime_counts(env).await? == vec![0, 0, 0, 0],
            "{name}: a refused import wrote"
        );
    }

    // The import.
    let first = ok_report(&import(env, &from, scheduler, common).await?)?;
    ensure!(first["dry_run"] == false, "{name}: reported as a dry run");
    ensure!(
        first["imported"] == dry_report["imported"],
        "{name}: the dry run planned {} but the import did {}",
        dry_report["imported"],
        first["imported"]
    );
    ensure!(
        first["needs_mapping"].as_array().is_some_and(Vec::is_empty),
        "{name}: every class is mapped, yet {}",
        first["needs_mapping"]
    );
    for job in &unreadable {
        let key = format!("{}.{}", text(job, "group"), text(job, "name"));
        ensure!(
            first["failed"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f["name"] == key.as_str())),
            "{name}: --skip-unreadable should still report job {key}: {}",
            first["failed"]
        );
    }

    // Triggers: chime's next fire times are Quartz's.
    let mut expected_triggers = BTreeSet::new();
    for t in of_type(&mine, "trigger") {
        let (group, tname) = (text(t, "group"), text(t, "name"));
        let key = format!("{name} trigger {group}.{tname}");
        let state = text(t, "state");
        if state == "COMPLETE" || state == "NONE" {
            continue;
        }
        let quartz: Vec<i64> = t["fires"]
            .as_array()
            .context("fires")?
            .iter()
            .filter_map(Value::as_i64)
            .collect();
        let found = triggers::get(&env.store, &group, &tname, FIRES).await;
        if quartz.is_empty() {
            // Quartz's misfire handling leaves it nothing to fire: it completes.
            match found {
                Err(StoreError::NotFound(_) | StoreError::NotFoundInGroup { .. }) => {}
                Ok(view) => problems.push(format!(
                    "{key}: Quartz completes it (its misfire policy leaves no fire), chime has it \
                     {} with fires {:?}",
                    view.state, view.next_fires
                )),
                Err(e) => return Err(e.into()),
            }
            continue;
        }
        expected_triggers.insert((group.clone(), tname.clone()));
        let view = match found {
            Ok(view) => view,
            Err(StoreError::NotFound(_) | StoreError::NotFoundInGroup { .. }) => {
                problems.push(format!(
                    "{key}: not imported (Quartz fires it at {})",
                    show(&quartz)
                ));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let chime = millis(&view.next_fires)?;
        if let Some(why) = compare_fires(&text(t, "effect"), &quartz, &chime) {
            problems.push(format!(
                "{key} ({} {}, misfire instruction {}, calendar {}): {why}",
                text(t, "kind"),
                state,
                t["instr"],
                t["calendar"]
            ));
        }
        let want_state = if state == "PAUSED" {
            "paused"
        } else {
            "waiting"
        };
        if view.state != want_state {
            problems.push(format!(
                "{key}: Quartz state {state}, chime {} (expected {want_state})",
                view.state
            ));
        }
        if i64::from(view.priority) != t["priority"].as_i64().unwrap_or(-1) {
            problems.push(format!(
                "{key}: priority {} in Quartz, {} in chime",
                t["priority"], view.priority
            ));
        }
        if view.calendar.as_deref() != t["calendar"].as_str() {
            problems.push(format!(
                "{key}: calendar {} in Quartz, {:?} in chime",
                t["calendar"], view.calendar
            ));
        }
        let want_policy = policy(&text(t, "kind"), t["instr"].as_i64().unwrap_or(99));
        if view.misfire_policy.as_str() != want_policy {
            problems.push(format!(
                "{key}: misfire instruction {} is {want_policy}, chime has {}",
                t["instr"], view.misfire_policy
            ));
        }
        if (view.job_group.as_str(), view.job.as_str())
            != (
                t["job_group"].as_str().unwrap_or(""),
                t["job_name"].as_str().unwrap_or(""),
            )
        {
            problems.push(format!(
                "{key}: job {}.{} in Quartz, {}.{} in chime",
                text(t, "job_group"),
                text(t, "job_name"),
                view.job_group,
                view.job
            ));
        }
        let (data, description): (Value, String) = sqlx::query_as(
            "SELECT data, description FROM triggers WHERE group_name = $1 AND name = $2",
        )
        .bind(&group)
        .bind(&tname)
        .fetch_one(env.store.pool())
        .await?;
        if description != text(t, "description") {
            problems.push(format!(
                "{key}: description {} in Quartz, {description:?} in chime",
                t["description"]
            ));
        }
        if data != t["data"] {
            problems.push(format!(
                "{key}: data {} in Quartz, {data} in chime",
                t["data"]
            ));
        }
    }

    eprintln!(
        "{name}: {} triggers compared with Quartz's next {FIRES} fires",
        expected_triggers.len()
    );

    // Jobs: their data as the oracle converted Quartz's JobDataMap.
    let mut expected_jobs = BTreeSet::new();
    for j in of_type(&mine, "job") {
        let (group, jname) = (text(j, "group"), text(j, "name"));
        let key = format!("{name} job {group}.{jname}");
        if j["unreadable"] == true {
            if jobs::get(&env.store, &group, &jname).await.is_ok() {
                problems.push(format!("{key}: unreadable, yet imported"));
            }
            continue;
        }
        expected_jobs.insert((group.clone(), jname.clone()));
        let view = match jobs::get(&env.store, &group, &jname).await {
            Ok(view) => view,
            Err(StoreError::NotFound(_) | StoreError::NotFoundInGroup { .. }) => {
                problems.push(format!("{key}: not imported"));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if view.description != text(j, "description") {
            problems.push(format!(
                "{key}: description {} in Quartz, {:?} in chime",
                j["description"], view.description
            ));
        }
        if view.data != j["data"] {
            problems.push(format!(
                "{key}: data differs\n      quartz: {}\n      chime:  {}",
                j["data"], view.data
            ));
        }
        let (durable, persist): (bool, bool) =
            sqlx::query_as("SELECT durable, persist_data FROM jobs WHERE id = $1")
                .bind(view.id)
                .fetch_one(env.store.pool())
                .await?;
        let flags = json!({
            "durable": durable, "nonconcurrent": !view.concurrent, "persist_data": persist,
            "requests_recovery": view.requests_recovery, "paused": view.paused,
        });
        let want = json!({
            "durable": j["durable"], "nonconcurrent": j["nonconcurrent"],
            "persist_data": j["persist_data"], "requests_recovery": j["requests_recovery"],
            "paused": false,
        });
        if flags != want {
            problems.push(format!("{key}: flags {want} in Quartz, {flags} in chime"));
        }
        let class = text(j, "class");
        let target = JOB_CLASSES
            .iter()
            .find_map(|m| m.strip_prefix(&format!("{class}=")))
            .unwrap_or("");
        let got = match view.kind.as_str() {
            "shell" => format!("shell:{}", text(&view.spec, "command")),
            "http" => format!("http:{}", text(&view.spec, "url")),
            other => other.to_string(),
        };
        if got != target {
            problems.push(format!(
                "{key}: class {class} maps to {target}, chime runs {got}"
            ));
        }
    }

    // Paused groups, empty ones and pauseAll()'s marker included; calendars by name.
    let quartz_paused: BTreeSet<String> = of_type(&mine, "paused_group")
        .map(|g| text(g, "group"))
        .collect();
    let chime_paused: BTreeSet<String> =
        sqlx::query_scalar("SELECT group_name FROM paused_trigger_groups")
            .fetch_all(env.store.pool())
            .await?
            .into_iter()
            .collect();
    if quartz_paused != chime_paused {
        problems.push(format!(
            "{name}: paused groups {quartz_paused:?} in Quartz, {chime_paused:?} in chime"
        ));
    }
    let calendars: BTreeSet<String> = sqlx::query_scalar("SELECT name FROM calendars")
        .fetch_all(env.store.pool())
        .await?
        .into_iter()
        .collect();
    for c in of_type(&mine, "calendar") {
        if !calendars.contains(&text(c, "name")) {
            problems.push(format!("{name} calendar {}: not imported", c["name"]));
        }
    }

    if name == "schedA" {
        let recovery = check_recovery(fixture, env, problems).await?;
        expected_triggers.insert(("RECOVERING_JOBS".into(), recovery));
    }
    // Nothing else: every chime trigger and job is one Quartz has (or schedA's recovery run).
    let all_triggers: Vec<(String, String)> =
        sqlx::query_as("SELECT group_name, name FROM triggers ORDER BY 1, 2")
            .fetch_all(env.store.pool())
            .await?;
    for (group, tname) in &all_triggers {
        if !expected_triggers.contains(&(group.clone(), tname.clone())) {
            problems.push(format!(
                "{name} trigger {group}.{tname}: in chime, not in Quartz"
            ));
        }
    }
    let all_jobs: BTreeSet<(String, String)> = sqlx::query_as("SELECT group_name, name FROM jobs")
        .fetch_all(env.store.pool())
        .await?
        .into_iter()
        .collect();
    if all_jobs != expected_jobs {
        problems.push(format!(
            "{name}: jobs {expected_jobs:?} expected, chime has {all_jobs:?}"
        ));
    }

    // Importing again changes nothing and says everything is there already.
    let before = chime_checksums(env).await?;
    let second = ok_report(&import(env, &from, scheduler, common).await?)?;
    ensure!(
        chime_checksums(env).await? == before,
        "{name}: a second import changed chime's store"
    );
    let present: BTreeSet<String> = second["already_present"]
        .as_array()
        .context("already_present")?
        .iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    let mut everything: BTreeSet<String> = all_triggers
        .iter()
        .map(|(g, n)| format!("trigger {g}.{n}"))
        .collect();
    everything.extend(all_jobs.iter().map(|(g, n)| format!("job {g}.{n}")));
    everything.extend(calendars.iter().map(|c| format!("calendar {c}")));
    ensure!(
        present == everything,
        "{name}: the second import should report everything as already present\n  missing: \
         {:?}\n  extra: {:?}",
        everything.difference(&present).collect::<Vec<_>>(),
        present.difference(&everything).collect::<Vec<_>>()
    );
    Ok(())
}

/// schedA's node was halted while b1's job ran: a one-shot recovery run at b1's scheduled time,
/// with b1's data and the four keys Quartz's recovery adds; b2 (blocked) waits, b3 stays paused.
/// Returns the name the recovery run must have.
async fn check_recovery(
    fixture: &Fixture,
    env: &TestEnv,
    problems: &mut Vec<String>,
) -> Result<String> {
    let mut conn = PgConnection::connect(&fixture.url(&fixture.source)).await?;
    let fired: Vec<(String, String, String, i64, i64, i32, String)> = sqlx::query_as(
        "SELECT entry_id, trigger_group, trigger_name, fired_time, sched_time, priority, state
         FROM qrtz_fired_triggers WHERE sched_name = 'schedA'",
    )
    .fetch_all(&mut conn)
    .await?;
    conn.close().await?;
    // The ticker's quick fires may be caught running by the halt too; its job does not request
    // recovery, so only b1's fire is re-run.
    let executing: Vec<_> = fired
        .iter()
        .filter(|f| f.6 == "EXECUTING" && f.2 == "b1")
        .collect();
    ensure!(
        executing.len() == 1,
        "MakeStore should leave b1's fire EXECUTING: {fired:?}"
    );
    let (entry, group, trigger, fired_time, sched_time, priority, _) = executing[0];
    let name = format!("recover_{entry}");
    let view = match triggers::get(&env.store, "RECOVERING_JOBS", &name, FIRES).await {
        Ok(view) => view,
        Err(StoreError::NotFound(_) | StoreError::NotFoundInGroup { .. }) => {
            problems.push(format!(
                "schedA: no recovery run RECOVERING_JOBS.{name} for b1's executing fire"
            ));
            return Ok(name);
        }
        Err(e) => return Err(e.into()),
    };
    let want_fires = vec![*sched_time];
    if millis(&view.next_fires)? != want_fires {
        problems.push(format!(
            "schedA recovery run: fires {:?}, Quartz recovers once at {}",
            view.next_fires,
            show(&want_fires)
        ));
    }
    if view.priority != *priority
        || view.misfire_policy.as_str() != "fire_all"
        || view.state != "waiting"
        || (view.job_group.as_str(), view.job.as_str()) != ("blocking", "job")
    {
        problems.push(format!(
            "schedA recovery run: priority {} (want {priority}), misfire {} (want fire_all), \
             state {} (want waiting), job {}.{} (want blocking.job)",
            view.priority, view.misfire_policy, view.state, view.job_group, view.job
        ));
    }
    let data: Value =
        sqlx::query_scalar("SELECT data FROM triggers WHERE group_name = $1 AND name = $2")
            .bind("RECOVERING_JOBS")
            .bind(&name)
            .fetch_one(env.store.pool())
            .await?;
    let want = json!({
        "source": "b1",
        "QRTZ_FAILED_JOB_ORIG_TRIGGER_NAME": trigger,
        "QRTZ_FAILED_JOB_ORIG_TRIGGER_GROUP": group,
        "QRTZ_FAILED_JOB_ORIG_TRIGGER_FIRETIME_IN_MILLISECONDS_AS_STRING": fired_time.to_string(),
        "QRTZ_FAILED_JOB_ORIG_TRIGGER_SCHEDULED_FIRETIME_IN_MILLISECONDS_AS_STRING":
            sched_time.to_string(),
    });
    if data != want {
        problems.push(format!(
            "schedA recovery run: data {data}, Quartz's recovery has {want}"
        ));
    }
    for (tname, state) in [("b2", "waiting"), ("b3", "paused")] {
        let view = triggers::get(&env.store, "blocking", tname, 1).await?;
        if view.state != state {
            problems.push(format!(
                "schedA trigger blocking.{tname}: {} (want {state})",
                view.state
            ));
        }
    }
    Ok(name)
}
