//! Jobs, triggers and calendars through the CLI and the running services.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_core::model::TaskStatus;
use chime_tests::{TestEnv, eventually};

fn assert_error(out: &std::process::Output, needle: &str) {
    assert!(!out.status.success(), "expected failure: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "{stderr:?} should be an error mentioning {needle:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_due_trigger_is_published_promptly_and_runs() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let job = env
        .chime(&[
            "job",
            "create",
            "hello",
            "--kind",
            "shell",
            "--",
            "echo",
            "from a trigger",
        ])
        .await?;
    assert!(job.status.success(), "{job:?}");
    // The cluster is idle: its schedulers sleep until something wakes them.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let trigger = env
        .chime(&[
            "trigger",
            "create",
            "now",
            "--job",
            "hello",
            "--schedule",
            r#"{"kind":"simple","interval_ms":0,"repeat_count":0}"#,
        ])
        .await?;
    assert!(trigger.status.success(), "{trigger:?}");
    eventually("the fired task to succeed", || async {
        let status: Option<String> = sqlx::query_scalar("SELECT status FROM tasks")
            .fetch_optional(env.store.pool())
            .await?;
        Ok(status.as_deref() == Some(TaskStatus::Succeeded.as_str()))
    })
    .await?;
    // Published promptly after the trigger's creation, by the database's clock (the figure is
    // `chime bench pickup`'s; here only a bound no slow machine misses).
    let pickup: f64 = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM o.published_at - t.created_at)::float8
         FROM outbox o, triggers t WHERE o.exchange LIKE '%.tasks'",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert!(
        pickup < 10.0,
        "published {pickup:.3} s after the trigger was created"
    );
    let output: String = sqlx::query_scalar("SELECT result->>'output' FROM tasks")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(output, "from a trigger\n");
    let shown = env.chime(&["trigger", "show", "now", "--json"]).await?;
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout)?;
    assert_eq!(shown["state"], "complete");
    assert_eq!(shown["times_triggered"], 1);
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_jobs_triggers_and_calendars_are_refused_and_change_nothing() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let ok = env.chime(&["job", "create", "j", "--kind", "noop"]).await?;
    assert!(ok.status.success(), "{ok:?}");
    assert_error(
        &env.chime(&["job", "create", "j", "--kind", "noop"]).await?,
        "exists already",
    );
    let cron = |expr: &str| format!(r#"{{"kind":"cron","cron":"{expr}"}}"#);
    assert_error(
        &env.chime(&[
            "trigger",
            "create",
            "t",
            "--job",
            "nope",
            "--schedule",
            &cron("0 * * * * ?"),
        ])
        .await?,
        "unknown job default.nope",
    );
    assert_error(
        &env.chime(&[
            "trigger",
            "create",
            "t",
            "--job",
            "j",
            "--schedule",
            &cron("0 0 12 32 * ?"),
        ])
        .await?,
        "cron field 4 (day-of-month): 32 is out of range 1-31",
    );
    assert_error(
        &env.chime(&[
            "trigger",
            "create",
            "t",
            "--job",
            "j",
            "--schedule",
            &cron("0 * * * * ?"),
            "--calendar",
            "holidays",
        ])
        .await?,
        "unknown calendar holidays",
    );
    assert_error(
        &env.chime(&[
            "trigger",
            "create",
            "t",
            "--job",
            "j",
            "--schedule",
            &cron("0 * * * * ?"),
            "--misfire",
            "reschedule_now_with_existing_count",
        ])
        .await?,
        "for simple triggers only",
    );
    let triggers: i64 = sqlx::query_scalar("SELECT count(*) FROM triggers")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(triggers, 0, "nothing written");

    let calendar = env
        .chime(&[
            "calendar",
            "create",
            "weekends",
            "--definition",
            r#"{"kind":"weekly","excluded_days":["SAT","SUN"]}"#,
        ])
        .await?;
    assert!(calendar.status.success(), "{calendar:?}");
    let trigger = env
        .chime(&[
            "trigger",
            "create",
            "t",
            "--job",
            "j",
            "--schedule",
            &cron("0 0 12 * * ?"),
            "--calendar",
            "weekends",
        ])
        .await?;
    assert!(trigger.status.success(), "{trigger:?}");
    assert_error(
        &env.chime(&["calendar", "delete", "weekends"]).await?,
        "in use",
    );
    assert_error(
        &env.chime(&[
            "trigger",
            "create",
            "t",
            "--job",
            "j",
            "--schedule",
            &cron("0 0 12 * * ?"),
        ])
        .await?,
        "exists already",
    );
    // `trigger show` lists the next 10 fire times, none on a weekend.
    let shown = env.chime(&["trigger", "show", "t", "--json"]).await?;
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout)?;
    let fires = shown["next_fires"].as_array().cloned().unwrap_or_default();
    assert_eq!(fires.len(), 10);
    for fire in fires {
        let at: jiff::Timestamp = fire.as_str().unwrap_or_default().parse()?;
        let day = at.to_zoned(jiff::tz::TimeZone::UTC).weekday();
        assert!(!matches!(
            day,
            jiff::civil::Weekday::Saturday | jiff::civil::Weekday::Sunday
        ));
    }
    env.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_update_reschedules_it_and_a_bad_one_changes_nothing() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    assert!(
        env.chime(&["job", "create", "j", "--kind", "noop"])
            .await?
            .status
            .success()
    );
    let yearly = r#"{"kind":"cron","cron":"0 0 0 1 1 ?"}"#;
    let created = env
        .chime(&["trigger", "create", "t", "--job", "j", "--schedule", yearly])
        .await?;
    assert!(created.status.success(), "{created:?}");
    let before = show(&env, "t").await?;
    let every_minute = r#"{"kind":"cron","cron":"0 * * * * ?"}"#;
    let updated = env
        .chime(&[
            "trigger",
            "update",
            "t",
            "--job",
            "j",
            "--schedule",
            every_minute,
        ])
        .await?;
    assert!(updated.status.success(), "{updated:?}");
    let after = show(&env, "t").await?;
    assert_ne!(after["next_fire_time"], before["next_fire_time"]);
    assert_eq!(after["schedule"]["cron"], "0 * * * * ?");
    let bad = env
        .chime(&[
            "trigger",
            "update",
            "t",
            "--job",
            "j",
            "--schedule",
            r#"{"kind":"cron","cron":"0 61 * * * ?"}"#,
        ])
        .await?;
    assert_error(&bad, "cron field 2 (minute): 61 is out of range 0-59");
    assert_eq!(show(&env, "t").await?["schedule"]["cron"], "0 * * * * ?");
    assert_error(
        &env.chime(&[
            "trigger",
            "update",
            "nope",
            "--job",
            "j",
            "--schedule",
            every_minute,
        ])
        .await?,
        "not found",
    );
    env.cleanup().await
}

async fn show(env: &TestEnv, name: &str) -> Result<serde_json::Value> {
    let out = env.chime(&["trigger", "show", name, "--json"]).await?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_calendars_can_be_updated() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    assert!(
        env.chime(&["job", "create", "j", "--kind", "noop"])
            .await?
            .status
            .success()
    );
    let updated = env
        .chime(&[
            "job",
            "update",
            "j",
            "--kind",
            "shell",
            "--no-concurrent",
            "--",
            "echo",
            "v2",
        ])
        .await?;
    assert!(updated.status.success(), "{updated:?}");
    let shown = env.chime(&["job", "show", "j", "--json"]).await?;
    let job: serde_json::Value = serde_json::from_slice(&shown.stdout)?;
    assert_eq!(job["kind"], "shell");
    assert_eq!(job["concurrent"], false);
    assert_eq!(job["spec"]["command"], serde_json::json!(["echo", "v2"]));
    assert_error(
        &env.chime(&["job", "update", "nope", "--kind", "noop"])
            .await?,
        "not found",
    );
    let weekly = r#"{"kind":"weekly","excluded_days":["SAT"]}"#;
    assert!(
        env.chime(&["calendar", "create", "c", "--definition", weekly])
            .await?
            .status
            .success()
    );
    let sundays = r#"{"kind":"weekly","excluded_days":["SUN"]}"#;
    assert!(
        env.chime(&["calendar", "update", "c", "--definition", sundays])
            .await?
            .status
            .success()
    );
    assert_error(
        &env.chime(&[
            "calendar",
            "update",
            "c",
            "--definition",
            r#"{"kind":"weekly","excluded_days":["XYZ"]}"#,
        ])
        .await?,
        "not a day of the week",
    );
    let listed = env.chime(&["calendar", "list", "--json"]).await?;
    let calendars: serde_json::Value = serde_json::from_slice(&listed.stdout)?;
    assert_eq!(
        calendars[0]["definition"]["excluded_days"],
        serde_json::json!(["SUN"])
    );
    env.cleanup().await
}

/// `--cron 'EXPR' --tz ZONE` and `--every 30s` say what `--schedule JSON` says, shorter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_and_every_shorthands_make_the_same_triggers() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    assert!(
        env.chime(&["job", "create", "j", "--kind", "noop"])
            .await?
            .status
            .success()
    );
    let cron = env
        .chime(&[
            "trigger",
            "create",
            "morning",
            "--job",
            "j",
            "--cron",
            "0 0 9 * * ?",
            "--tz",
            "Asia/Shanghai",
        ])
        .await?;
    assert!(cron.status.success(), "{cron:?}");
    let shown = show(&env, "morning").await?;
    assert_eq!(shown["schedule"]["kind"], "cron");
    assert_eq!(shown["schedule"]["time_zone"], "Asia/Shanghai");
    // 09:00 in Shanghai is 01:00 UTC.
    let next: jiff::Timestamp = shown["next_fire_time"]
        .as_str()
        .unwrap_or_default()
        .parse()?;
    assert_eq!(next.to_zoned(jiff::tz::TimeZone::UTC).hour(), 1, "{shown}");
    let every = env
        .chime(&["trigger", "create", "often", "--job", "j", "--every", "30s"])
        .await?;
    assert!(every.status.success(), "{every:?}");
    let shown = show(&env, "often").await?;
    assert_eq!(shown["schedule"]["kind"], "simple");
    assert_eq!(shown["schedule"]["interval_ms"], 30_000);
    assert_eq!(shown["schedule"]["repeat_count"], -1);
    let neither = env.chime(&["trigger", "create", "t", "--job", "j"]).await?;
    assert!(!neither.status.success());
    let both = env
        .chime(&[
            "trigger",
            "create",
            "t",
            "--job",
            "j",
            "--every",
            "1m",
            "--cron",
            "* * * * *",
        ])
        .await?;
    assert!(!both.status.success());
    env.cleanup().await
}

/// `job create` takes every job setting the API takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_create_takes_every_setting() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let out = env
        .chime(&[
            "job",
            "create",
            "etl",
            "--kind",
            "noop",
            "--worker-group",
            "default",
            "--failed-retries",
            "2",
            "--failed-interval-ms",
            "500",
            "--reject-retries",
            "3",
            "--reject-interval-ms",
            "700",
            "--backoff",
            "exponential",
            "--priority",
            "7",
            "--data",
            r#"{"table": "orders"}"#,
            "--execute-user",
            "daemon",
            "--timeout-ms",
            "9000",
            "--description",
            "nightly orders",
        ])
        .await?;
    assert!(out.status.success(), "{out:?}");
    #[allow(clippy::type_complexity)]
    let row: (
        i32,
        i64,
        i32,
        i64,
        serde_json::Value,
        i32,
        serde_json::Value,
        Option<String>,
        Option<i64>,
        String,
    ) = sqlx::query_as(
        "SELECT failed_retries, failed_interval_ms, reject_retries, reject_interval_ms,
                    backoff, priority, data, execute_user, timeout_ms, description
             FROM jobs WHERE name = 'etl'",
    )
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!((row.0, row.1, row.2, row.3), (2, 500, 3, 700));
    assert_eq!(row.4["kind"], "exponential");
    assert_eq!(row.5, 7);
    assert_eq!(row.6["table"], "orders");
    assert_eq!(row.7.as_deref(), Some("daemon"));
    assert_eq!(row.8, Some(9000));
    assert_eq!(row.9, "nightly orders");
    env.cleanup().await
}

async fn job_j(env: &TestEnv) -> Result<serde_json::Value> {
    let shown = ok(env, &["job", "show", "j", "--json"]).await?;
    Ok(serde_json::from_str(&shown)?)
}

/// Runs `chime ARGS` and returns its stdout, failing the test with its stderr if it failed.
async fn ok(env: &TestEnv, args: &[&str]) -> Result<String> {
    let out = env.chime(args).await?;
    anyhow::ensure!(out.status.success(), "chime {args:?} failed: {out:?}");
    Ok(String::from_utf8(out.stdout)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_changes_only_what_it_is_given_and_the_audit_trail_says_what() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    ok(
        &env,
        &[
            "job",
            "create",
            "j",
            "--kind",
            "shell",
            "--failed-retries",
            "2",
            "--description",
            "nightly export",
            "--",
            "echo",
            "v1",
        ],
    )
    .await?;
    // Only the timeout is given: the command, the retry budget and the description stay.
    let said = ok(&env, &["job", "update", "j", "--timeout-ms", "60000"]).await?;
    assert_eq!(said.trim(), "default.j: timeout_ms null → 60000");
    let shown = job_j(&env).await?;
    assert_eq!(shown["timeout_ms"], 60000);
    assert_eq!(shown["failed_retries"], 2);
    assert_eq!(shown["description"], "nightly export");
    assert_eq!(shown["spec"]["command"], serde_json::json!(["echo", "v1"]));
    // A bad value changes nothing.
    assert_error(
        &env.chime(&["job", "update", "j", "--timeout-ms", "0"])
            .await?,
        "timeout_ms must be positive",
    );
    assert_eq!(job_j(&env).await?["timeout_ms"], 60000);
    // Over the API: an unknown setting is named; the identity cannot change.
    let client = reqwest::Client::new();
    let url = format!("{}/api/v1/jobs/default/j", env.api_url());
    for (body, needle) in [
        (serde_json::json!({"timout_ms": 5}), "timout_ms"),
        (serde_json::json!({"name": "k"}), "name cannot be changed"),
    ] {
        let answer = client.patch(&url).json(&body).send().await?;
        assert_eq!(answer.status(), 400, "{body}");
        let text = answer.text().await?;
        assert!(text.contains(needle), "{text} should name {needle}");
    }
    // --replace keeps the full replace: what is not given returns to its default.
    ok(&env, &["job", "update", "j", "--replace", "--kind", "noop"]).await?;
    let shown = job_j(&env).await?;
    assert_eq!(shown["failed_retries"], 0);
    assert_eq!(shown["kind"], "noop");

    // A trigger's priority changes without moving its next fire.
    let yearly = r#"{"kind":"cron","cron":"0 0 0 1 1 ?"}"#;
    ok(
        &env,
        &["trigger", "create", "t", "--job", "j", "--schedule", yearly],
    )
    .await?;
    let before = show(&env, "t").await?;
    let said = ok(&env, &["trigger", "update", "t", "--priority", "9"]).await?;
    assert!(said.contains("default.t: priority 5 → 9"), "{said}");
    let after = show(&env, "t").await?;
    assert_eq!(after["priority"], 9);
    assert_eq!(after["next_fire_time"], before["next_fire_time"]);
    assert_eq!(after["schedule"]["cron"], "0 0 0 1 1 ?");

    // The audit trail names what changed and how.
    let audit = ok(&env, &["audit", "--target", "default.j", "--json"]).await?;
    let events: Vec<serde_json::Value> = serde_json::from_str(&audit)?;
    let patched = events
        .iter()
        .find(|e| e["action"] == "PATCH" && e["status"] == 200)
        .unwrap_or_else(|| panic!("no PATCH of the job in {events:#?}"));
    assert_eq!(patched["object"], "job default.j");
    assert_eq!(
        patched["changes"],
        serde_json::json!([{"field": "timeout_ms", "before": null, "after": 60000}])
    );
    assert!(
        events
            .iter()
            .any(|e| e["action"] == "POST" && e["target"] == "/api/v1/jobs"),
        "the creation names its job: {events:#?}"
    );
    let audit = ok(&env, &["audit", "--target", "trigger default.t", "--json"]).await?;
    let events: Vec<serde_json::Value> = serde_json::from_str(&audit)?;
    assert!(
        events
            .iter()
            .any(|e| e["action"] == "POST" && e["target"] == "/api/v1/triggers"),
        "the trigger's creation is found by its name: {events:#?}"
    );
    assert!(
        events.iter().any(|e| e["action"] == "PATCH"
            && e["changes"] == serde_json::json!([{"field": "priority", "before": 5, "after": 9}])),
        "{events:#?}"
    );
    env.cleanup().await
}

/// Quartz users name jobs in their own language: a job, trigger, calendar and groups named with
/// any printable characters work through the CLI and the API (paths percent-encoded) and show
/// unchanged; a name with '/' or a control character is refused with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_in_any_language_work_through_the_cli_and_the_api() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let (job, group) = ("日报 ?#%&+", "relatórios.diários");
    let (trigger, trigger_group) = ("diário às 07:00", "équipe \"α\"");
    let calendar = "feriados 🎉";
    ok(
        &env,
        &[
            "calendar",
            "create",
            calendar,
            "--definition",
            r#"{"kind":"weekly","excluded_days":["SAT","SUN"],"time_zone":"Europe/Lisbon"}"#,
        ],
    )
    .await?;
    ok(
        &env,
        &["job", "create", job, "--group", group, "--kind", "noop"],
    )
    .await?;
    ok(
        &env,
        &[
            "trigger",
            "create",
            trigger,
            "--group",
            trigger_group,
            "--job",
            job,
            "--job-group",
            group,
            "--calendar",
            calendar,
            "--schedule",
            r#"{"kind":"cron","cron":"0 0 7 * * ?","time_zone":"Europe/Lisbon"}"#,
        ],
    )
    .await?;

    let shown = ok(
        &env,
        &[
            "trigger",
            "show",
            trigger,
            "--group",
            trigger_group,
            "--json",
            "--count",
            "25",
        ],
    )
    .await?;
    let shown: serde_json::Value = serde_json::from_str(&shown)?;
    assert_eq!(shown["name"], trigger);
    assert_eq!(shown["group"], trigger_group);
    assert_eq!(shown["job"], job);
    assert_eq!(shown["job_group"], group);
    assert_eq!(shown["calendar"], calendar);
    let fires = shown["next_fires"].as_array().cloned().unwrap_or_default();
    assert_eq!(fires.len(), 25, "{shown}");
    for fire in &fires {
        let at: jiff::Timestamp = fire.as_str().unwrap_or_default().parse()?;
        let local = at.to_zoned(jiff::tz::TimeZone::get("Europe/Lisbon")?);
        assert_eq!((local.hour(), local.minute()), (7, 0), "{fire}");
        assert!(!matches!(
            local.weekday(),
            jiff::civil::Weekday::Saturday | jiff::civil::Weekday::Sunday
        ));
    }
    let job_shown = ok(&env, &["job", "show", job, "--group", group, "--json"]).await?;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&job_shown)?["name"],
        job
    );
    ok(
        &env,
        &["trigger", "pause", trigger, "--group", trigger_group],
    )
    .await?;
    ok(&env, &["trigger", "resume-group", trigger_group]).await?;

    // A group with a dot in it (as Quartz users name them): `group.name` as one value finds the
    // one job its dots can name; --job-group gives the group apart, which is needed once a
    // second job makes the value name two.
    let dotted = format!("{group}.{job}");
    ok(
        &env,
        &[
            "webhook",
            "add",
            "https://alerts.example.com/a",
            "--job",
            &dotted,
        ],
    )
    .await?;
    ok(&env, &["task", "list", "--job", &dotted]).await?;
    let rerun = ok(&env, &["task", "rerun", "--job", &dotted, "--dry-run"]).await?;
    assert!(
        rerun.contains(&format!("0 task(s) of {dotted} would be re-run")),
        "{rerun}"
    );
    let (shadow_group, shadow) = dotted.split_once('.').unwrap_or_default();
    ok(
        &env,
        &[
            "job",
            "create",
            shadow,
            "--group",
            shadow_group,
            "--kind",
            "noop",
        ],
    )
    .await?;
    assert_error(
        &env.chime(&[
            "webhook",
            "add",
            "https://alerts.example.com/b",
            "--job",
            &dotted,
        ])
        .await?,
        "names 2 jobs",
    );
    assert_error(
        &env.chime(&["task", "list", "--job", &dotted]).await?,
        "names 2 jobs",
    );
    assert_error(
        &env.chime(&["task", "rerun", "--job", &dotted, "--dry-run"])
            .await?,
        "names 2 jobs",
    );
    ok(
        &env,
        &[
            "webhook",
            "add",
            "https://alerts.example.com/b",
            "--job",
            job,
            "--job-group",
            group,
        ],
    )
    .await?;
    let hooks: serde_json::Value =
        serde_json::from_str(&ok(&env, &["webhook", "list", "--json"]).await?)?;
    assert_eq!(hooks[0]["job"], dotted, "{hooks}");
    assert_eq!(hooks[1]["job"], dotted, "{hooks}");
    ok(&env, &["task", "list", "--job", job, "--job-group", group]).await?;
    let rerun = ok(
        &env,
        &[
            "task",
            "rerun",
            "--job",
            job,
            "--job-group",
            group,
            "--dry-run",
        ],
    )
    .await?;
    assert!(
        rerun.contains(&format!("0 task(s) of {dotted} would be re-run")),
        "{rerun}"
    );
    ok(&env, &["job", "delete", shadow, "--group", shadow_group]).await?;

    // The API, with the names percent-encoded as any HTTP client does.
    let client = chime_tests::http();
    let mut url = reqwest::Url::parse(env.api_url())?;
    url.path_segments_mut()
        .map_err(|()| anyhow::anyhow!("no path"))?
        .extend(["api", "v1", "triggers", trigger_group, trigger]);
    let answer = client
        .get(url.clone())
        .query(&[("count", "3")])
        .send()
        .await?;
    assert_eq!(answer.status(), 200);
    let view: serde_json::Value = answer.json().await?;
    assert_eq!(view["next_fires"].as_array().map(Vec::len), Some(3));
    assert_eq!(view["state"], "waiting");
    let answer = client.get(url).query(&[("count", "1001")]).send().await?;
    assert_eq!(answer.status(), 400);
    assert!(answer.text().await?.contains("count 1001"));

    // What cannot be a name is refused with the reason, and nothing is made.
    for (bad, why) in [
        ("a/b", "'/'"),
        ("line\nbreak", "U+000A"),
        ("..", "cannot name"),
    ] {
        let out = env.chime(&["job", "create", bad, "--kind", "noop"]).await?;
        assert_error(&out, why);
    }
    let long = "é".repeat(201);
    assert_error(
        &env.chime(&[
            "calendar",
            "create",
            &long,
            "--definition",
            r#"{"kind":"weekly","excluded_days":[]}"#,
        ])
        .await?,
        "at most 200",
    );
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(jobs, 1);
    env.cleanup().await
}

/// One name has one spelling: a job made with `é` as `e` and a combining accent (NFD, as macOS
/// and some keyboards type it) is stored composed (NFC), is found by either spelling, and the
/// composed spelling cannot make a second job. Zero-width and bidirectional marks, which make
/// two names that look the same differ, are refused with the character named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_has_one_spelling_and_invisible_characters_are_refused() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let (nfd, nfc) = ("cafe\u{301} du matin", "caf\u{e9} du matin");
    ok(&env, &["job", "create", nfd, "--kind", "noop"]).await?;
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM jobs")
        .fetch_all(env.store.pool())
        .await?;
    assert_eq!(names, [nfc.to_string()], "stored composed");
    for spelling in [nfd, nfc] {
        let shown = ok(&env, &["job", "show", spelling, "--json"]).await?;
        let shown: serde_json::Value = serde_json::from_str(&shown)?;
        assert_eq!(shown["name"], nfc, "{spelling:?}: {shown}");
    }
    let again = env.chime(&["job", "create", nfc, "--kind", "noop"]).await?;
    assert!(!again.status.success(), "{again:?}");
    for (name, code) in [
        ("zero\u{200B}width", "U+200B"),
        ("\u{FEFF}bom", "U+FEFF"),
        ("right\u{200F}mark", "U+200F"),
    ] {
        let out = env
            .chime(&["job", "create", name, "--kind", "noop"])
            .await?;
        assert!(!out.status.success(), "{name:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(code), "{name:?}: {stderr}");
    }
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(env.store.pool())
        .await?;
    assert_eq!(jobs, 1, "the refused names made nothing");
    env.cleanup().await
}

/// Resuming a paused trigger group does not replay the times missed while it was paused: they
/// follow the trigger's misfire policy (an every-second trigger's `smart` policy waits for its
/// next time), however short the pause, so no fire is made for a time inside the pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_paused_group_follows_the_misfire_policy() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services {
        api: true,
        worker: false,
        scheduler: true,
        dependency: false,
    })
    .await?;
    ok(&env, &["job", "create", "tick", "--kind", "noop"]).await?;
    ok(
        &env,
        &[
            "trigger",
            "create",
            "every-second",
            "--job",
            "tick",
            "--every",
            "1s",
        ],
    )
    .await?;
    let fires = || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM fired_triggers")
            .fetch_one(env.store.pool())
            .await?;
        anyhow::Ok(n)
    };
    eventually("the trigger to fire", || async { Ok(fires().await? >= 2) }).await?;
    ok(&env, &["trigger", "pause-group", "default"]).await?;
    let paused_at: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(env.store.pool())
        .await?;
    eventually("four fire times to pass while paused", || async {
        let passed: bool = sqlx::query_scalar(
            "SELECT next_fire_time < now() - interval '4 s' FROM triggers WHERE name = 'every-second'",
        )
        .fetch_one(env.store.pool())
        .await?;
        Ok(passed)
    })
    .await?;
    ok(&env, &["trigger", "resume-group", "default"]).await?;
    let resumed_at: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(env.store.pool())
        .await?;
    eventually("the trigger to fire after the resume", || async {
        let after: i64 =
            sqlx::query_scalar("SELECT count(*) FROM fired_triggers WHERE fired_time > $1")
                .bind(resumed_at)
                .fetch_one(env.store.pool())
                .await?;
        Ok(after >= 2)
    })
    .await?;
    let replayed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM fired_triggers
         WHERE sched_time > $1 AND sched_time < $2 AND fired_time > $2",
    )
    .bind(paused_at)
    .bind(resumed_at)
    .fetch_one(env.store.pool())
    .await?;
    assert_eq!(
        replayed, 0,
        "times missed while paused were fired after the resume"
    );
    env.cleanup().await
}

/// Names stored before chime took them composed are rewritten composed on upgrade (migration
/// 0022): a job, a calendar (with its triggers' reference), a trigger and its paused group typed
/// in the decomposed form are found by their name afterwards. A decomposed name whose composed
/// spelling names another job keeps its old spelling rather than taking the other's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_stored_decomposed_are_composed_on_upgrade() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let (nfd, nfc) = ("cafe\u{301}", "caf\u{e9}");
    let (nfd_tea, nfc_tea) = ("the\u{301}", "th\u{e9}");
    for job in ["old-cafe", "old-tea", nfc_tea] {
        ok(&env, &["job", "create", job, "--kind", "noop"]).await?;
    }
    ok(
        &env,
        &[
            "calendar",
            "create",
            "old-calendar",
            "--definition",
            r#"{"kind":"weekly","excluded_days":["SAT","SUN"]}"#,
        ],
    )
    .await?;
    let every = ["--every", "1h", "--calendar", "old-calendar"];
    ok(
        &env,
        &[
            &["trigger", "create", "old-trigger", "--job", "old-cafe"][..],
            &every[..],
        ]
        .concat(),
    )
    .await?;
    for name in ["unpaused", "paused"] {
        ok(
            &env,
            &[
                "trigger", "create", name, "--job", "old-tea", "--every", "1h",
            ],
        )
        .await?;
    }
    // The store as an older chime left it: every spelling as it was typed.
    let pool = env.store.pool();
    for (sql, name) in [
        ("UPDATE jobs SET name = $1 WHERE name = 'old-cafe'", nfd),
        ("UPDATE jobs SET name = $1 WHERE name = 'old-tea'", nfd_tea),
        (
            "UPDATE calendars SET name = $1 WHERE name = 'old-calendar'",
            nfd,
        ),
        (
            "UPDATE triggers SET name = $1, group_name = $1 WHERE name = 'old-trigger'",
            nfd,
        ),
        (
            "INSERT INTO paused_trigger_groups (group_name) VALUES ($1)",
            nfd,
        ),
        // A paused group spelled decomposed beside a running one spelled composed.
        (
            "UPDATE triggers SET group_name = $1 WHERE name = 'unpaused'",
            nfc_tea,
        ),
        (
            "UPDATE triggers SET group_name = $1 WHERE name = 'paused'",
            nfd_tea,
        ),
        (
            "INSERT INTO paused_trigger_groups (group_name) VALUES ($1)",
            nfd_tea,
        ),
    ] {
        sqlx::query(sql).bind(name).execute(pool).await?;
    }
    sqlx::raw_sql(include_str!("../../../migrations/0022_composed_names.sql"))
        .execute(pool)
        .await?;

    let jobs: Vec<String> = sqlx::query_scalar("SELECT name FROM jobs ORDER BY id")
        .fetch_all(pool)
        .await?;
    assert_eq!(
        jobs,
        [nfc, nfd_tea, nfc_tea],
        "the taken name kept its spelling"
    );
    let trigger: (String, String, Option<String>) = sqlx::query_as(
        "SELECT group_name, name, calendar_name FROM triggers WHERE calendar_name IS NOT NULL",
    )
    .fetch_one(pool)
    .await?;
    assert_eq!(
        trigger,
        (nfc.into(), nfc.into(), Some(nfc.into())),
        "the trigger and its calendar"
    );
    let paused: Vec<String> =
        sqlx::query_scalar("SELECT group_name FROM paused_trigger_groups ORDER BY group_name")
            .fetch_all(pool)
            .await?;
    assert_eq!(paused, [nfc, nfd_tea], "the running group was not paused");
    let groups: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, group_name FROM triggers WHERE name IN ('paused', 'unpaused') ORDER BY name",
    )
    .fetch_all(pool)
    .await?;
    assert_eq!(
        groups,
        [
            ("paused".to_string(), nfd_tea.to_string()),
            ("unpaused".to_string(), nfc_tea.to_string())
        ],
        "a paused trigger does not move into a running group"
    );
    for spelling in [nfd, nfc] {
        let shown = ok(&env, &["job", "show", spelling, "--json"]).await?;
        let shown: serde_json::Value = serde_json::from_str(&shown)?;
        assert_eq!(shown["name"], nfc, "{spelling:?}: {shown}");
        let definition = r#"{"kind":"weekly","excluded_days":["SUN"]}"#;
        ok(
            &env,
            &["calendar", "update", spelling, "--definition", definition],
        )
        .await?;
    }
    env.cleanup().await
}
