//! The dashboard in a real browser (headless Chromium over the DevTools protocol) against the
//! running services, behind an API token: what a user sees on each page, the buttons that change
//! things, and live updates arriving without a reload. Screenshots of every page go to
//! `$TMPDIR/chime-dashboard-screenshots/` (outside the repository) to be looked at.
//!
//! Without Chromium the test says so and passes, unless `CHIME_REQUIRE_BROWSER=1` (CI sets it).

use anyhow::{Context, Result};
use chime_cli::commands::services::Services;
use chime_core::model::TaskStatus;
use chime_tests::browser::{Browser, Page, chromium_binary};
use chime_tests::{TestEnv, eventually, last_line};
use serde_json::Value;
use uuid::Uuid;

/// Whether Chromium is here to run a browser test; without it the test is skipped, saying so,
/// unless `CHIME_REQUIRE_BROWSER=1`.
fn have_chromium() -> Result<bool> {
    if chromium_binary().is_some() {
        return Ok(true);
    }
    anyhow::ensure!(
        std::env::var("CHIME_REQUIRE_BROWSER").as_deref() != Ok("1"),
        "chromium is not installed (apt-get install chromium)"
    );
    eprintln!("skipped: chromium is not installed (apt-get install chromium)");
    Ok(false)
}

fn screenshots() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join("chime-dashboard-screenshots");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

async fn shoot(page: &Page<'_>, name: &str) -> Result<()> {
    page.screenshot(&screenshots()?.join(format!("{name}.png")))
        .await
}

/// The next 02:30 in Tokyo, as the job page shows it.
fn next_tokyo_0230() -> Result<String> {
    let tz = jiff::tz::TimeZone::get("Asia/Tokyo")?;
    let now = jiff::Timestamp::now().to_zoned(tz.clone());
    let mut day = now.date();
    loop {
        let at = day.at(2, 30, 0, 0).to_zoned(tz.clone())?;
        if at > now {
            return Ok(format!("{} Asia/Tokyo", at.strftime("%Y-%m-%d %H:%M:%S")));
        }
        day = day.tomorrow()?;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_jobs_tasks_and_the_grid_and_its_buttons_work() -> Result<()> {
    if !have_chromium()? {
        return Ok(());
    }
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    // With a token in the store, every API call needs one: the dashboard signs in with it.
    let secret = env
        .chime_ok(&["token", "create", "operator", "--role", "admin"])
        .await?;
    let with_token = |args: &[&str]| {
        let mut full = vec!["--token", secret.as_str()];
        full.extend_from_slice(args);
        full.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let env = &env;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            env.chime_ok(&args).await
        }
    };
    run(with_token(&[
        "job",
        "create",
        "extract",
        "--kind",
        "shell",
        "--data-time-period",
        "day",
        "--",
        "sh",
        "-c",
        "echo extracting for $CHIME_DATA_TIME",
    ]))
    .await?;
    run(with_token(&[
        "job",
        "create",
        "load",
        "--kind",
        "shell",
        "--data-time-period",
        "day",
        "--",
        "sh",
        "-c",
        "echo loaded",
    ]))
    .await?;
    run(with_token(&["job", "depend", "load", "--on", "extract"])).await?;
    run(with_token(&[
        "trigger",
        "create",
        "nightly",
        "--job",
        "extract",
        "--cron",
        "0 30 2 * * ?",
        "--tz",
        "Asia/Tokyo",
    ]))
    .await?;
    let extract: Uuid = run(with_token(&[
        "job",
        "run",
        "extract",
        "--data-time",
        "2026-11-20T00:00:00Z",
    ]))
    .await?
    .parse()?;
    assert_eq!(
        env.wait_terminal(extract).await?.status,
        TaskStatus::Succeeded
    );
    let load_id = |env: &TestEnv| {
        let store = env.store.clone();
        async move {
            let id: Option<Uuid> = sqlx::query_scalar(
                "SELECT t.id FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.name = 'load'",
            )
            .fetch_optional(store.pool())
            .await?;
            anyhow::Ok(id)
        }
    };
    eventually("load to run after extract", || async {
        Ok(match load_id(&env).await? {
            Some(id) => env.task(id).await?.status == TaskStatus::Succeeded,
            None => false,
        })
    })
    .await?;

    let browser = Browser::launch(1366, 900).await?;
    let base = env.api_url().to_string();
    let page = browser.open(&format!("{base}/jobs")).await?;
    // Before signing in, the API refuses the page's calls and the page says how to get in.
    page.wait_for_text("sign in").await?;
    page.eval(&format!(
        "document.getElementById('token').value = {}; \
         document.getElementById('signin-button').click(); true",
        serde_json::to_string(&secret)?
    ))
    .await?;
    page.wait_for_text("default.extract").await?;
    // Each job's recent runs at a glance.
    page.wait_for(
        "extract's recent-runs strip",
        "!!document.querySelector('tr[data-job=\"default.extract\"] .strip span.bg-succeeded')",
    )
    .await?;
    shoot(&page, "jobs").await?;

    // The job's page: its trigger's next fire times in the trigger's zone.
    page.click("a", "default.extract").await?;
    page.wait_for_text("Triggers (next 10 fire times").await?;
    let next = next_tokyo_0230()?;
    page.wait_for_text(&next)
        .await
        .with_context(|| format!("the next fire {next}"))?;
    page.wait_for_text("Needed by").await?;
    page.wait_for_text("default.load").await?;
    // Where it came from: not a definitions file, so editing it here is safe.
    page.wait_for_text("made by hand").await?;
    // History at a glance: the recent runs' durations as bars, each its task's link, and each
    // run's duration in the list.
    page.wait_for(
        "the recent runs' chart",
        "document.querySelectorAll('.runs-chart a.bar-run.bg-succeeded').length >= 1",
    )
    .await?;
    page.wait_for_text(" ms").await?;
    shoot(&page, "job").await?;

    // A task's page shows its output.
    page.goto(&format!("{base}/tasks/{extract}")).await?;
    page.wait_for_text("extracting for 2026-11-20T00:00:00Z")
        .await?;
    shoot(&page, "task").await?;

    // The grid: a cell per job and data time, coloured by status; a rerun from a cell.
    page.goto(&format!("{base}/dependencies")).await?;
    let cell = |job: &str| {
        format!("document.querySelector('[data-cell=\"default.{job}|2026-11-20T00:00:00Z\"]')")
    };
    page.wait_for(
        "the grid cell of load on 2026-11-20",
        &format!("{}?.dataset.status === 'succeeded'", cell("load")),
    )
    .await?;
    shoot(&page, "dependencies").await?;
    page.eval(&format!("{}.click(); true", cell("extract")))
        .await?;
    page.wait_for_text("Rerun").await?;
    // A destructive action asks first, saying what it will do; nothing happens until confirmed.
    page.click("button", "Rerun").await?;
    page.wait_for_text("for this data time again?").await?;
    assert_eq!(
        env.task(extract).await?.attempt,
        1,
        "not before it is confirmed"
    );
    page.click("button", "Yes, rerun").await?;
    eventually("the rerun's second attempt to succeed", || async {
        let task = env.task(extract).await?;
        Ok(task.attempt == 2 && task.status == TaskStatus::Succeeded)
    })
    .await?;
    // The cell follows the rerun without a reload.
    page.eval("window.__not_reloaded = true").await?;
    page.wait_for(
        "the cell to show the rerun's end",
        &format!("{}?.dataset.status === 'succeeded'", cell("extract")),
    )
    .await?;

    // Live: a task submitted elsewhere appears in the open task list without a reload.
    page.goto(&format!("{base}/tasks")).await?;
    page.wait_for_text("Submit an ad-hoc task").await?;
    page.eval("window.__not_reloaded = true").await?;
    let live = run(with_token(&[
        "submit",
        "--kind",
        "shell",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 180 ]; do i=$((i+1)); echo line $i; [ $i -lt 60 ] || sleep 1; done",
    ]))
    .await?;
    page.wait_for(
        "the new task's row, live",
        &format!("document.querySelector('tr[data-task=\"{live}\"]')"),
    )
    .await?;
    assert_eq!(
        page.eval("window.__not_reloaded === true").await?,
        Value::Bool(true)
    );
    shoot(&page, "tasks").await?;

    // Its page (reached through its link, without a reload) streams its output while it runs,
    // and Kill kills it.
    page.eval(&format!(
        "document.querySelector('tr[data-task=\"{live}\"] a').click(); true"
    ))
    .await?;
    page.wait_for_text("line 3").await?;
    assert_eq!(
        page.eval("window.__not_reloaded === true").await?,
        Value::Bool(true)
    );
    // The log box, taller than it shows, follows its tail: the newest line is in view as lines
    // keep coming.
    page.wait_for_text("line 63").await?;
    page.wait_for(
        "the log box to show its newest line",
        "(() => { const p = document.querySelector('.logbox pre'); \
           return p.scrollHeight > p.clientHeight \
             && p.scrollTop + p.clientHeight >= p.scrollHeight - 4; })()",
    )
    .await?;
    shoot(&page, "task-running").await?;
    page.click("button", "Kill").await?;
    page.wait_for_text("Kill this task?").await?;
    page.click("button", "Yes, kill").await?;
    let id: Uuid = live.parse()?;
    assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Killed);
    page.wait_for(
        "the page to show the task killed",
        "[...document.querySelectorAll('h2 .status')].some(e => e.textContent === 'killed')",
    )
    .await?;
    shoot(&page, "task-killed").await?;

    // The other pages render what they list.
    for (path, shows) in [
        ("/", "Worker groups"),
        ("/triggers", "default.nightly"),
        ("/workers", "default"),
        ("/schedulers", "alive"),
        ("/backfills", "Backfills"),
        ("/calendars", "Calendars"),
    ] {
        page.goto(&format!("{base}{path}")).await?;
        page.wait_for_text(shows).await?;
        let name = if path == "/" { "overview" } else { &path[1..] };
        shoot(&page, name).await?;
    }
    browser.close().await;
    env.cleanup().await
}

/// Starts `chime up` for a figures test on this installation, from `CHIME_BIN` (a release build
/// gives the figures worth reporting) or the test build's binary; returns it and its API's URL.
async fn figures_up(env: &TestEnv) -> Result<(tokio::process::Child, String)> {
    let binary = std::env::var_os("CHIME_BIN")
        .map(std::path::PathBuf::from)
        .map_or_else(chime_tests::chime_binary, Ok)?;
    let port = chime_tests::free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let api = tokio::process::Command::new(&binary)
        .args(["up", "--api-addr", &format!("127.0.0.1:{port}")])
        .env("CHIME_DATABASE_URL", &env.settings.database_url)
        .env("CHIME_AMQP_URL", &env.settings.amqp_url)
        .env("CHIME_PREFIX", &env.settings.prefix)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        // Its worker runs noop tasks of a throwaway installation.
        .env("CHIME_WORKER__ALLOW_OPEN_STORE", "true")
        .env_remove("CHIME_API_TOKEN")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    env.track(&api);
    eventually("the API to answer", || async {
        Ok(chime_tests::http()
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()))
    })
    .await?;
    Ok((api, base))
}

/// The dashboard's figures (not a check: run by hand with `--ignored`): with 100,000 tasks in
/// the store, each page's weight and time to first render, then the API's memory while ten
/// browsers watch the task list as tasks flow. `CHIME_BIN` picks the API binary (a release
/// build gives the figures worth reporting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures, run by hand"]
async fn dashboard_figures() -> Result<()> {
    use std::time::Instant;
    let env = TestEnv::new().await?;
    // 100,000 ended tasks over the last ten days, of ten jobs, and a few live ones.
    sqlx::query(
        "INSERT INTO jobs (group_name, name, kind, spec, worker_group, data_time_period)
         SELECT 'default', 'job' || n, 'noop', '{}', 'default', 'hour'
         FROM generate_series(1, 10) n",
    )
    .execute(env.store.pool())
    .await?;
    let start = jiff::Timestamp::now().as_millisecond() - 10 * 86_400_000;
    for batch in 0..10 {
        let ids: Vec<Uuid> = (0..10_000)
            .map(|i| {
                let ms = u64::try_from(start + (batch * 10_000 + i) * 8_640).unwrap_or(0);
                let random: [u8; 10] = *Uuid::now_v7().as_bytes().last_chunk().unwrap_or(&[7; 10]);
                uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid()
            })
            .collect();
        sqlx::query(
            "INSERT INTO tasks (id, job_id, kind, spec, worker_group, status, created_at,
                                started_at, finished_at, data_time, result)
             SELECT id, (SELECT id FROM jobs ORDER BY random() LIMIT 1), 'noop', '{}', 'default',
                    CASE WHEN random() < 0.05 THEN 'failed' ELSE 'succeeded' END,
                    now() - interval '1 day', now() - interval '1 day', now() - interval '1 day',
                    date_trunc('hour', now() - interval '1 day'),
                    '{\"exit_code\":0,\"output\":\"done\\n\"}'
             FROM unnest($1::uuid[]) AS id",
        )
        .bind(&ids)
        .execute(env.store.pool())
        .await?;
    }
    let (mut api, base) = figures_up(&env).await?;
    let pid = api.id().context("the API's pid")?;
    let rss = |field: &str| -> Result<String> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        Ok(status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_default()
            .split_whitespace()
            .nth(1)
            .unwrap_or("0")
            .to_string())
    };
    println!(
        "store: 100000 tasks; `chime up` RSS before any browser: {} kB",
        rss("VmRSS")?
    );
    let browser = Browser::launch(1366, 900).await?;
    let page = browser.open("about:blank").await?;
    for (path, ready) in [
        ("/", "document.querySelector('[data-count=\"succeeded\"]')"),
        (
            "/tasks",
            "document.querySelectorAll('tr[data-task]').length >= 50",
        ),
        (
            "/jobs",
            "document.querySelectorAll('tr[data-job]').length >= 10",
        ),
        ("/dependencies", "document.querySelector('main section')"),
    ] {
        for round in 0..2 {
            let started = Instant::now();
            page.goto(&format!("{base}{path}")).await?;
            page.wait_for(path, ready).await?;
            let elapsed = started.elapsed();
            let bytes = page
                .eval(
                    "performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
                       .reduce((n, e) => n + (e.encodedBodySize || 0), 0)",
                )
                .await?;
            if round == 1 {
                println!(
                    "page {path}: first render {} ms, {bytes} bytes transferred (bodies)",
                    elapsed.as_millis()
                );
            }
        }
    }
    browser.close().await;

    // Ten browsers watch the task list while 500 tasks flow.
    let mut watchers = Vec::new();
    for _ in 0..10 {
        let browser = Browser::launch(1280, 800).await?;
        watchers.push(browser);
    }
    let mut pages = Vec::new();
    for browser in &watchers {
        let page = browser.open(&format!("{base}/tasks")).await?;
        page.wait_for(
            "the list",
            "document.querySelectorAll('tr[data-task]').length >= 50",
        )
        .await?;
        pages.push(page);
    }
    let client = chime_tests::http();
    let mut peak = 0_u64;
    for _ in 0..500 {
        client
            .post(format!("{base}/api/v1/tasks"))
            .json(&serde_json::json!({ "kind": "noop" }))
            .send()
            .await?;
        peak = peak.max(rss("VmRSS")?.parse().unwrap_or(0));
    }
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        peak = peak.max(rss("VmRSS")?.parse().unwrap_or(0));
    }
    for page in &pages {
        page.wait_for(
            "the live rows",
            "[...document.querySelectorAll('tr[data-task] .status')].filter(e => e.textContent === 'succeeded').length >= 50",
        )
        .await?;
    }
    println!(
        "ten browsers on /tasks, 500 tasks submitted: `chime up` RSS peak {peak} kB (VmHWM {} kB)",
        rss("VmHWM")?
    );
    drop(pages);
    for browser in watchers {
        browser.close().await;
    }
    let _ = api.kill().await;
    env.cleanup().await
}

/// An API that needs no token (loopback, none configured) shows no sign-in box.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_api_shows_no_sign_in_box() -> Result<()> {
    if !have_chromium()? {
        return Ok(());
    }
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let browser = Browser::launch(1366, 900).await?;
    let page = browser.open(&format!("{}/", env.api_url())).await?;
    page.wait_for_text("Tasks").await?;
    page.wait_for(
        "the sign-in box to be hidden",
        "getComputedStyle(document.getElementById('signin')).display === 'none'",
    )
    .await?;
    env.cleanup().await
}

/// A data time reads the same in every browser, in its job's zone and saying so; timestamps say
/// their zone (UTC, or the viewer's by the toggle) and how long ago they were; the data-time
/// filter is read in the zone shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_say_their_zone_whatever_the_browsers() -> Result<()> {
    if !have_chromium()? {
        return Ok(());
    }
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    env.chime_ok(&[
        "job",
        "create",
        "report",
        "--kind",
        "noop",
        "--data-time-period",
        "day",
        "--data-time-zone",
        "Asia/Shanghai",
    ])
    .await?;
    // The daily report for 2026-11-22 in Shanghai: its data time is 2026-11-21T16:00Z.
    let id = env
        .chime_ok(&[
            "job",
            "run",
            "report",
            "--data-time",
            "2026-11-22T03:00:00+08:00",
        ])
        .await?;
    env.wait_terminal(id.parse()?).await?;
    let browser = Browser::launch(1366, 900).await?;
    let page = browser.open("about:blank").await?;
    for zone in ["America/Los_Angeles", "Asia/Tokyo"] {
        page.set_time_zone(zone).await?;
        page.goto(&format!("{}/tasks/{id}", env.api_url())).await?;
        page.wait_for_text("2026-11-22 00:00:00 Asia/Shanghai")
            .await?;
        // Timestamps in UTC by default, labelled, with their distance from now.
        page.wait_for_text(" UTC (").await?;
        page.wait_for_text(" ago)").await?;
    }
    // The toggle shows timestamps in the browser's zone, labelled with it.
    page.click("button", "times: UTC").await?;
    page.wait_for_text("Asia/Tokyo (").await?;
    page.wait_for_text("2026-11-22 00:00:00 Asia/Shanghai")
        .await?;
    shoot(&page, "task-zones").await?;
    // The filter is read in the zone shown (Tokyo here): from 2026-11-22 01:00 Tokyo is
    // 2026-11-21T16:00Z, which the report's data time is at.
    page.goto(&format!(
        "{}/tasks?data_time_from=2026-11-22T01:00&data_time_to=2026-11-22T01:01",
        env.api_url()
    ))
    .await?;
    page.wait_for(
        "the report's task in the filtered list",
        &format!("!!document.querySelector('tr[data-task=\"{id}\"]')"),
    )
    .await?;
    browser.close().await;
    env.cleanup().await
}

/// The grid shows each job's own runs, a daily job's days beside an hourly job's hours, and
/// keeps the reader's scroll position while live events change its cells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grid_shows_each_jobs_own_runs_and_keeps_its_scroll_under_live_events() -> Result<()> {
    if !have_chromium()? {
        return Ok(());
    }
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    for (job, period) in [("hourly", "hour"), ("daily", "day")] {
        env.chime_ok(&[
            "job",
            "create",
            job,
            "--kind",
            "noop",
            "--data-time-period",
            period,
        ])
        .await?;
    }
    env.chime_ok(&[
        "job", "depend", "daily", "--on", "hourly", "--window", "period",
    ])
    .await?;
    let mut last = String::new();
    for hour in 0..30 {
        last = env
            .chime_ok(&[
                "job",
                "run",
                "hourly",
                "--data-time",
                &format!("2026-11-{:02}T{:02}:00:00Z", 20 + hour / 24, hour % 24),
            ])
            .await?;
    }
    env.wait_terminal(last.parse()?).await?;
    for day in ["2026-11-19T00:00:00Z", "2026-11-20T00:00:00Z"] {
        last = env
            .chime_ok(&["job", "run", "daily", "--data-time", day])
            .await?;
    }
    env.wait_terminal(last.parse()?).await?;

    let browser = Browser::launch(700, 500).await?;
    let page = browser
        .open(&format!("{}/dependencies", env.api_url()))
        .await?;
    // The daily job's days and the hourly job's hours, each in its own row.
    page.wait_for(
        "a daily and an hourly row",
        "!!document.querySelector('[data-cell=\"default.daily|2026-11-20T00:00:00Z\"]') \
         && !!document.querySelector('[data-cell=\"default.hourly|2026-11-21T05:00:00Z\"]')",
    )
    .await?;
    shoot(&page, "grid").await?;
    page.eval(
        "window.__not_reloaded = true; \
         document.querySelector('.grid-wrap').scrollLeft = 120; window.scrollTo(0, 60); true",
    )
    .await?;
    let scroll = "[document.querySelector('.grid-wrap').scrollLeft, window.scrollY]";
    let before = page.eval(scroll).await?;
    anyhow::ensure!(before[0].as_f64() > Some(0.0), "the grid scrolls: {before}");
    // Ten live events: re-runs of shown hours, each changing its cell.
    let mut reruns = Vec::new();
    for hour in 10..20 {
        let cell = format!("default.hourly|2026-11-20T{hour:02}:00:00Z");
        let id = page
            .eval(&format!(
                "document.querySelector('[data-cell=\"{cell}\"]').dataset.task"
            ))
            .await?;
        let id = id.as_str().unwrap_or_default().to_string();
        env.chime_ok(&["task", "rerun", &id]).await?;
        reruns.push(id.parse::<Uuid>()?);
    }
    for id in &reruns {
        eventually("the rerun to end", || async {
            Ok(env.task(*id).await?.attempt == 2 && env.task(*id).await?.status.is_terminal())
        })
        .await?;
    }
    page.wait_for(
        "the cells to show the reruns' ends",
        "[...document.querySelectorAll('[data-cell^=\"default.hourly|2026-11-20T1\"]')] \
           .every((a) => a.dataset.status === 'succeeded')",
    )
    .await?;
    assert_eq!(
        page.eval(scroll).await?,
        before,
        "the scroll position survived"
    );
    assert_eq!(
        page.eval("window.__not_reloaded === true").await?,
        Value::Bool(true)
    );
    // A run for a new data time appears live, and live events keep coming after it.
    for hour in ["06", "07"] {
        env.chime_ok(&[
            "job",
            "run",
            "hourly",
            "--data-time",
            &format!("2026-11-21T{hour}:00:00Z"),
        ])
        .await?;
        page.wait_for(
            &format!("the {hour}:00 cell"),
            &format!(
                "document.querySelector('[data-cell=\"default.hourly|2026-11-21T{hour}:00:00Z\"]')\
                 ?.dataset.status === 'succeeded'"
            ),
        )
        .await?;
    }
    assert_eq!(
        page.eval("window.__not_reloaded === true").await?,
        Value::Bool(true)
    );
    // An open question survives a new cell: the grid's redraw waits until it is answered.
    page.eval("document.querySelector('[data-cell=\"default.hourly|2026-11-20T10:00:00Z\"]').click(); true")
        .await?;
    page.click("button", "Rerun").await?;
    page.wait_for_text("for this data time again?").await?;
    let eight = env
        .chime_ok(&[
            "job",
            "run",
            "hourly",
            "--data-time",
            "2026-11-21T08:00:00Z",
        ])
        .await?;
    env.wait_terminal(eight.parse()?).await?;
    let ticks = page.eval("window.chimeTicks || 0").await?;
    page.wait_for(
        "two live ticks",
        &format!(
            "(window.chimeTicks || 0) >= {}",
            ticks.as_i64().unwrap_or(0) + 2
        ),
    )
    .await?;
    assert_eq!(
        page.eval("[...document.querySelectorAll('.confirm:not([hidden])')].some((e) => e.textContent.includes('for this data time again?'))")
            .await?,
        Value::Bool(true),
        "the question is still open"
    );
    page.click("button", "No").await?;
    env.chime_ok(&[
        "job",
        "run",
        "hourly",
        "--data-time",
        "2026-11-21T09:00:00Z",
    ])
    .await?;
    page.wait_for(
        "the 08:00 and 09:00 cells, once the question is answered",
        "!!document.querySelector('[data-cell=\"default.hourly|2026-11-21T08:00:00Z\"]') \
         && !!document.querySelector('[data-cell=\"default.hourly|2026-11-21T09:00:00Z\"]')",
    )
    .await?;
    browser.close().await;
    env.cleanup().await
}

/// Tasks picked in the list are killed or re-run in one go, after a question that says how many;
/// the page's own submit form makes a task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_picked_in_the_list_are_rerun_together() -> Result<()> {
    if !have_chromium()? {
        return Ok(());
    }
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    let mut failed = Vec::new();
    for _ in 0..3 {
        let out = env
            .chime(&["submit", "--kind", "shell", "--script", "exit 4"])
            .await?;
        anyhow::ensure!(out.status.success(), "{out:?}");
        let id: Uuid = last_line(&out).parse()?;
        assert_eq!(env.wait_terminal(id).await?.status, TaskStatus::Failed);
        failed.push(id);
    }
    let browser = Browser::launch(1366, 900).await?;
    let page = browser
        .open(&format!("{}/tasks?status=failed", env.api_url()))
        .await?;
    page.wait_for(
        "three rows",
        "document.querySelectorAll('input.pick').length === 3",
    )
    .await?;
    page.eval(
        "const all = document.querySelector('thead input[type=checkbox]'); all.click(); true",
    )
    .await?;
    page.wait_for_text("3 selected").await?;
    page.click("button", "Rerun selected").await?;
    page.wait_for_text("Run 3 task(s) again?").await?;
    page.click("button", "Yes, rerun selected").await?;
    page.wait_for_text("3 task(s) re-run").await?;
    for id in &failed {
        eventually("the second attempt", || async {
            Ok(env.task(*id).await?.attempt == 2)
        })
        .await?;
    }
    // The page's submit form.
    page.eval(
        "document.querySelector('input[name=command]').value = 'echo from the page'; \
         [...document.querySelectorAll('button')].find((b) => b.textContent === 'Submit').click(); true",
    )
    .await?;
    page.wait_for_text("from the page").await?;
    browser.close().await;
    env.cleanup().await
}

/// Drain and Cancel ask first, saying what will happen, and nothing happens until "Yes"; the
/// question stays put while the page's live refreshes (a tick every 5 s) go by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_and_cancel_ask_first_and_the_question_outlives_live_refreshes() -> Result<()> {
    if !have_chromium()? {
        return Ok(());
    }
    let mut env = TestEnv::new().await?;
    env.start(Services::ALL).await?;
    env.chime_ok(&[
        "job",
        "create",
        "slow",
        "--kind",
        "shell",
        "--data-time-period",
        "hour",
        "--",
        "sleep",
        "60",
    ])
    .await?;
    env.chime_ok(&[
        "trigger",
        "create",
        "hourly",
        "--job",
        "slow",
        "--schedule",
        r#"{"kind":"cron","cron":"0 0 * * * ?","time_zone":"UTC"}"#,
    ])
    .await?;
    env.chime_ok(&[
        "backfill",
        "slow",
        "--from",
        "2026-01-05T00:00:00Z",
        "--to",
        "2026-01-05T05:59:59Z",
        "--parallelism",
        "1",
    ])
    .await?;
    let open_tasks = || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks
             WHERE backfill_id IS NOT NULL AND status IN ('waiting', 'ready', 'running', 'retrying')",
        )
        .fetch_one(env.store.pool())
        .await?;
        Ok::<_, anyhow::Error>(n)
    };
    let browser = Browser::launch(1366, 900).await?;
    let page = browser
        .open(&format!("{}/backfills", env.api_url()))
        .await?;
    // Waits until the page has received two more live ticks than it had, then checks that the
    // question is still shown.
    let still_asking = |says: &'static str| {
        let page = &page;
        async move {
            let ticks = page.eval("window.chimeTicks || 0").await?;
            let ticks = ticks.as_i64().context("window.chimeTicks")?;
            page.wait_for(
                "two live ticks",
                &format!("(window.chimeTicks || 0) >= {}", ticks + 2),
            )
            .await?;
            let shown = page
                .eval(&format!(
                    "[...document.querySelectorAll('.confirm:not([hidden])')]\
                     .some((e) => e.textContent.includes({says:?}))"
                ))
                .await?;
            anyhow::ensure!(
                shown == Value::Bool(true),
                "the question {says:?} went away"
            );
            Ok::<_, anyhow::Error>(())
        }
    };

    // The list is drawn once the page's first request returns.
    page.wait_for_text("Cancel").await?;
    page.click("button", "Cancel").await?;
    let question = "Its tasks that have not ended are killed.";
    page.wait_for_text(question).await?;
    still_asking(question).await?;
    assert_eq!(
        open_tasks().await?,
        6,
        "nothing is killed before it is confirmed"
    );
    shoot(&page, "backfill-cancel-asked").await?;
    page.click("button", "Yes, cancel").await?;
    eventually("the backfill's tasks to be killed", || async {
        Ok(open_tasks().await? == 0)
    })
    .await?;
    page.wait_for_text("done").await?;

    page.goto(&format!("{}/workers", env.api_url())).await?;
    page.click("button", "Drain").await?;
    let question = "It takes no more work, finishes what runs and goes offline.";
    page.wait_for_text(question).await?;
    still_asking(question).await?;
    let online = || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM workers WHERE status = 'online'")
            .fetch_one(env.store.pool())
            .await?;
        Ok::<_, anyhow::Error>(n)
    };
    assert_eq!(
        online().await?,
        1,
        "the worker is not drained before it is confirmed"
    );
    shoot(&page, "worker-drain-asked").await?;
    page.click("button", "Yes, drain").await?;
    eventually("the worker to leave", || async { Ok(online().await? == 0) }).await?;
    browser.close().await;
    env.cleanup().await
}

/// Figures for the grid page (run by hand, with `--ignored --nocapture`): 50 jobs in a chain,
/// each with 100 hourly runs; the page's first render and the bytes it transferred.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures, run by hand"]
async fn grid_figures() -> Result<()> {
    use std::time::Instant;
    let env = TestEnv::new().await?;
    sqlx::query(
        "INSERT INTO jobs (group_name, name, kind, spec, worker_group, data_time_period)
         SELECT 'default', 'job' || lpad(n::text, 2, '0'), 'noop', '{}', 'default', 'hour'
         FROM generate_series(1, 50) n",
    )
    .execute(env.store.pool())
    .await?;
    sqlx::query(
        "INSERT INTO job_dependencies (job_id, depends_on_job_id)
         SELECT d.id, u.id FROM jobs d JOIN jobs u ON u.name = 'job' || lpad(
             (substr(d.name, 4)::int - 1)::text, 2, '0')",
    )
    .execute(env.store.pool())
    .await?;
    sqlx::query(
        "INSERT INTO tasks (id, job_id, kind, spec, worker_group, status, created_at, started_at,
                            finished_at, data_time)
         SELECT gen_random_uuid(), j.id, 'noop', '{}', 'default',
                CASE WHEN random() < 0.05 THEN 'failed' ELSE 'succeeded' END,
                now(), now(), now(), date_trunc('hour', now()) - h * interval '1 hour'
         FROM jobs j, generate_series(0, 99) h",
    )
    .execute(env.store.pool())
    .await?;
    let (mut up, base) = figures_up(&env).await?;
    let browser = Browser::launch(1366, 900).await?;
    let page = browser.open("about:blank").await?;
    for round in 0..3 {
        let started = Instant::now();
        page.goto(&format!("{base}/dependencies")).await?;
        page.wait_for(
            "the grid",
            "document.querySelectorAll('a.run').length >= 50 * 30",
        )
        .await?;
        let elapsed = started.elapsed();
        let bytes = page
            .eval(
                "performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
                   .reduce((n, e) => n + (e.encodedBodySize || 0), 0)",
            )
            .await?;
        if round > 0 {
            println!(
                "grid, 50 jobs x 100 data times (30 shown per row): first render {} ms, {bytes} bytes transferred (bodies)",
                elapsed.as_millis()
            );
        }
    }
    browser.close().await;
    let _ = up.kill().await;
    env.cleanup().await
}
