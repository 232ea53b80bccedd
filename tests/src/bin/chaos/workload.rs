//! The chaos suite's workload: ~200 triggers of all four kinds (some through a calendar) on jobs
//! that succeed, fail and retry, reject and retry, or run one at a time; a dependency diamond
//! fed every 5 s for the whole run (a per-minute period window, then a join); ad-hoc submissions through the API and
//! through raw AMQP (with ids), and kills. Every command appends a `start` and an `end` line to the
//! side-effect log: `start|end TASK ATTEMPT JOB EPOCH_NS`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use chime_core::Store;
use chime_core::bus::{Topology, publish_confirmed};
use chime_core::schedule::CalendarSpec;
use chime_core::store::calendars::{self, NamedCalendar};
use chime_core::store::dependencies::{self, NewDependency, Window};
use chime_core::store::jobs::{self, NewJob};
use chime_core::store::triggers::{self, NewTrigger};
use lapin::options::ConfirmSelectOptions;
use lapin::types::FieldTable;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::Rng;

/// The trigger group of the periodic triggers whose fires are checked against the schedule.
pub const CHAOS_GROUP: &str = "chaos";
/// The non-concurrent jobs.
pub const ONE_AT_A_TIME: [&str; 2] = ["nc-0", "nc-1"];
/// The job that feeds the diamond, every 5 s.
pub const FEED: &str = "feed";
/// The downstream jobs of the diamond (per minute): two on the feed, and the join of those two.
pub const DIAMOND: [&str; 3] = ["fold-b", "fold-c", "fold-d"];
/// How many poison messages the run sends on purpose.
pub const POISON: i64 = 2;

/// The body of poison message `n` (0-based): no task, so it is dead-lettered.
pub fn poison_body(n: i64) -> Vec<u8> {
    format!("this is not a task ({n})").into_bytes()
}

/// A command that logs its start, an `alive` line every 0.2 s for `seconds`, then runs `tail` and
/// logs its end: `start|alive|end TASK ATTEMPT JOB EPOCH_NS`. An attempt's last line is the last
/// moment it was known to run, so two attempts of a task that ran at once show.
fn logged(log: &Path, seconds: u32, tail: &str) -> String {
    let log = log.display();
    let line = |what: &str| {
        format!(
            r#"printf '{what} %s %s %s %s\n' "$CHIME_TASK_ID" "$CHIME_ATTEMPT" "$JOB" "$(date +%s%N)" >> {log}"#
        )
    };
    let (start, alive, end) = (line("start"), line("alive"), line("end"));
    let steps = seconds * 5;
    format!(
        "{start}; i=0; while [ $i -lt {steps} ]; do sleep 0.2; {alive}; i=$((i+1)); done; \
         {tail}; rc=$?; {end}; exit $rc"
    )
}

fn shell(log: &Path, job: &str, seconds: u32, tail: &str) -> serde_json::Value {
    json!({ "command": logged(log, seconds, tail), "env": { "JOB": job } })
}

async fn job(store: &Store, name: &str, spec: serde_json::Value, setup: NewJob) -> Result<()> {
    jobs::create(
        store,
        NewJob {
            name: name.into(),
            kind: "shell".into(),
            spec,
            ..setup
        },
    )
    .await
    .with_context(|| format!("creating job {name}"))?;
    Ok(())
}

/// Creates the jobs, calendar, triggers and dependencies; the diamond is fed for `minutes`.
/// Returns how many periodic triggers there are, and when the diamond's feed ends.
pub async fn set_up(
    store: &Store,
    log: &Path,
    rng: &mut Rng,
    minutes: f64,
) -> Result<(usize, jiff::Timestamp)> {
    calendars::create(
        store.pool(),
        NamedCalendar {
            name: "quiet".into(),
            description: "no fires in the last ten seconds of a minute".into(),
            definition: serde_json::from_value::<CalendarSpec>(
                json!({"kind": "cron", "cron": "50-59 * * ? * *", "time_zone": "UTC"}),
            )?,
        },
        None,
    )
    .await?;
    let mut runners = Vec::new();
    // About 2 fires a second each (194 triggers over 6 jobs, every 10–30 s): the seconds below
    // (which take half as long again on a loaded machine) keep 5–7 slots of each group busy, so
    // that one of its workers alone drains the backlog an outage leaves within seconds.
    for (n, seconds) in [0, 1, 0, 2].into_iter().enumerate() {
        let name = format!("ok-{n}");
        let group = if n < 2 { "default" } else { "etl" };
        job(
            store,
            &name,
            shell(log, &name, seconds, "true"),
            NewJob {
                worker_group: Some(group.into()),
                requests_recovery: Some(n % 2 == 0),
                ..NewJob::default()
            },
        )
        .await?;
        runners.push(name);
    }
    job(
        store,
        "flaky",
        shell(log, "flaky", 1, r#"[ "$CHIME_ATTEMPT" -ge 2 ]"#),
        NewJob {
            failed_retries: Some(2),
            failed_interval_ms: Some(1000),
            ..NewJob::default()
        },
    )
    .await?;
    job(
        store,
        "busy",
        shell(log, "busy", 0, r#"[ "$CHIME_ATTEMPT" != 1 ] || (exit 75)"#),
        NewJob {
            reject_retries: Some(2),
            reject_interval_ms: Some(1000),
            worker_group: Some("etl".into()),
            ..NewJob::default()
        },
    )
    .await?;
    runners.extend(["flaky".to_string(), "busy".to_string()]);
    for name in ONE_AT_A_TIME {
        job(
            store,
            name,
            shell(log, name, 1, "true"),
            NewJob {
                concurrent: Some(false),
                requests_recovery: Some(true),
                ..NewJob::default()
            },
        )
        .await?;
    }
    // The periodic triggers: all four kinds, every fifth through the calendar.
    // Whole seconds: the store keeps microseconds, and the check recomputes from what it kept.
    let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())?;
    let mut count = 0;
    for i in 0..200 {
        let job = if i < 6 {
            ONE_AT_A_TIME[i % 2].to_string()
        } else {
            runners[rng.below(runners.len())].clone()
        };
        let period = [10, 15, 20, 30][rng.below(4)];
        let offset = rng.below(period);
        let start = now + jiff::SignedDuration::from_secs((offset + 2) as i64);
        let schedule = match i % 4 {
            0 => json!({"kind": "cron", "cron": format!("{offset}/{period} * * * * ?")}),
            1 => json!({"kind": "simple", "interval_ms": period * 1000, "repeat_count": -1,
                        "start_time": start}),
            2 => json!({"kind": "calendar_interval", "interval": period, "unit": "second",
                        "start_time": start}),
            _ => json!({"kind": "daily_time_interval", "interval": period, "unit": "second",
                        "start_time_of_day": "00:00:00", "end_time_of_day": "23:59:59",
                        "start_time": start}),
        };
        triggers::create(
            store,
            NewTrigger {
                group: Some(CHAOS_GROUP.into()),
                name: format!("t{i}"),
                job_group: None,
                job,
                schedule: serde_json::from_value(schedule)?,
                calendar: (i % 5 == 4).then(|| "quiet".into()),
                misfire_policy: None,
                priority: None,
                description: None,
                data: serde_json::Value::Null,
            },
        )
        .await?;
        count += 1;
    }
    let feed_ends = set_up_diamond(store, log, minutes).await?;
    Ok((count, feed_ends))
}

/// feed (every 5 s) → fold-b, fold-c (each minute's feeds: a period window) → fold-d (the join),
/// from the next whole minute for as many whole minutes as the run has faults. Returns when the
/// feed ends: faults go on until then, so every minute it feeds meets them.
async fn set_up_diamond(store: &Store, log: &Path, minutes: f64) -> Result<jiff::Timestamp> {
    // The diamond's jobs run again when lost with their worker: it checks dependencies, not the
    // lost attempts' policy (which the other jobs cover).
    job(
        store,
        FEED,
        shell(log, FEED, 0, "true"),
        NewJob {
            requests_recovery: Some(true),
            ..NewJob::default()
        },
    )
    .await?;
    for name in DIAMOND {
        job(
            store,
            name,
            shell(log, name, 0, "true"),
            NewJob {
                data_time_period: Some("minute".into()),
                requests_recovery: Some(true),
                ..NewJob::default()
            },
        )
        .await?;
    }
    let depend = |job: &'static str, upstream: &'static str, window| async move {
        dependencies::add(
            store,
            "default",
            job,
            NewDependency {
                upstream: upstream.into(),
                upstream_group: None,
                window: Some(window),
                on_upstream_failure: None,
            },
        )
        .await
        .with_context(|| format!("{job} depends on {upstream}"))
    };
    depend(DIAMOND[0], FEED, Window::Period).await?;
    depend(DIAMOND[1], FEED, Window::Period).await?;
    depend(DIAMOND[2], DIAMOND[0], Window::Same).await?;
    depend(DIAMOND[2], DIAMOND[1], Window::Same).await?;
    let now = jiff::Timestamp::now().as_second();
    let start = jiff::Timestamp::from_second((now / 60 + 1) * 60)?;
    let end = start + jiff::SignedDuration::from_mins((minutes.floor() as i64).max(1));
    triggers::create(
        store,
        NewTrigger {
            group: Some("feed".into()),
            name: FEED.into(),
            job_group: None,
            job: FEED.into(),
            schedule: serde_json::from_value(json!({
                "kind": "cron", "cron": "*/5 * * * * ?", "start_time": start, "end_time": end
            }))?,
            calendar: None,
            misfire_policy: None,
            priority: None,
            description: None,
            data: serde_json::Value::Null,
        },
    )
    .await?;
    Ok(end)
}

/// What the ad-hoc and kill loops did.
#[derive(Debug, Default)]
pub struct Activity {
    /// Submissions the API accepted or the broker confirmed: each must exist and end.
    pub submitted: Vec<Uuid>,
    /// Kills the API accepted.
    pub kills: usize,
    /// Poison messages the broker confirmed, and those sent at all (a publish whose confirm was
    /// lost to a fault may still have landed): the dead letters must lie between the two.
    pub poison: (i64, i64),
}

/// A confirming channel to the broker, or None while it cannot be had (a fault of the run may
/// have the broker down: the harness's own connection must outlive it).
async fn open_channel(amqp_url: &str) -> Option<(lapin::Connection, lapin::Channel)> {
    let connect = async {
        let conn =
            lapin::Connection::connect(amqp_url, lapin::ConnectionProperties::default()).await?;
        let channel = conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        lapin::Result::Ok((conn, channel))
    };
    tokio::time::timeout(Duration::from_secs(5), connect)
        .await
        .ok()?
        .ok()
}

/// Submits ad-hoc tasks through the API and raw AMQP, alternately, every 500 ms, and ten at once
/// every tenth time; kills a long task now and then; until `stop`.
pub async fn ad_hoc(
    api_url: String,
    amqp_url: String,
    topology: Topology,
    store: Store,
    log: std::path::PathBuf,
    activity: Arc<Mutex<Activity>>,
    stop: CancellationToken,
) -> Result<()> {
    let http = chime_tests::http();
    let mut broker: Option<(lapin::Connection, lapin::Channel)> = None;
    let mut n: u64 = 0;
    while !stop.is_cancelled() {
        if broker.is_none() {
            broker = open_channel(&amqp_url).await;
        }
        // The poison messages first, each until the broker confirms it.
        let confirmed = activity.lock().map(|a| a.poison.0).unwrap_or(POISON);
        if confirmed < POISON
            && let Some((_, channel)) = &broker
        {
            if let Ok(mut activity) = activity.lock() {
                activity.poison.1 += 1;
            }
            let sent = tokio::time::timeout(
                Duration::from_secs(5),
                publish_confirmed(
                    channel,
                    &topology.submit_exchange(),
                    &topology.submit_exchange(),
                    &poison_body(confirmed),
                    FieldTable::default(),
                ),
            )
            .await;
            match sent {
                Ok(Ok(())) => {
                    if let Ok(mut activity) = activity.lock() {
                        activity.poison.0 += 1;
                    }
                }
                _ => broker = None,
            }
            continue;
        }
        n += 1;
        let id = Uuid::now_v7();
        let task = json!({
            "v": 1, "id": id, "kind": "shell", "group": if n.is_multiple_of(3) { "etl" } else { "default" },
            "spec": shell(&log, "adhoc", 0, "sleep 0.2"),
            "requests_recovery": n.is_multiple_of(2),
        });
        let accepted = if n.is_multiple_of(2) {
            // The API may be down (killed, or the database away): the same id again is safe.
            let mut accepted = false;
            for _ in 0..3 {
                let body = json!({
                    "id": id, "kind": "shell", "group": task["group"], "spec": task["spec"],
                    "requests_recovery": task["requests_recovery"],
                });
                match http
                    .post(format!("{api_url}/api/v1/tasks"))
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(response) if response.status().is_success() => {
                        accepted = true;
                        break;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
            accepted
        } else if let Some((_, channel)) = &broker {
            let sent = tokio::time::timeout(
                Duration::from_secs(5),
                publish_confirmed(
                    channel,
                    &topology.submit_exchange(),
                    &topology.submit_exchange(),
                    &serde_json::to_vec(&task)?,
                    FieldTable::default(),
                ),
            )
            .await;
            let ok = matches!(sent, Ok(Ok(())));
            if !ok {
                broker = None;
            }
            ok
        } else {
            false
        };
        if accepted && let Ok(mut activity) = activity.lock() {
            activity.submitted.push(id);
        }
        if n.is_multiple_of(10) {
            let channel = broker.as_ref().map(|(_, channel)| channel);
            let ids = submit_batch(&http, &api_url, channel, &topology, &log, n).await;
            if ids.is_empty() && !(n / 10).is_multiple_of(2) {
                broker = None;
            }
            if let Ok(mut activity) = activity.lock() {
                activity.submitted.extend(ids);
            }
        }
        if n.is_multiple_of(15) {
            kill_one(&http, &api_url, &store, &activity).await;
        }
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
    if let Some((conn, _)) = broker {
        let _ = conn.close(200, "done".into()).await;
    }
    Ok(())
}

/// Ten submissions at once, through `POST /api/v1/tasks/batch` or (every other time) as a
/// burst of AMQP publishes that the worker records as one batch; the ids accepted (the HTTP
/// batch is all or nothing; each publish counts once its confirm came). Every other one of them
/// is a noop (nothing to run: its worker completes it in one statement, never `running`).
async fn submit_batch(
    http: &reqwest::Client,
    api_url: &str,
    channel: Option<&lapin::Channel>,
    topology: &Topology,
    log: &Path,
    n: u64,
) -> Vec<Uuid> {
    let ids: Vec<Uuid> = (0..10).map(|_| Uuid::now_v7()).collect();
    let spec = shell(log, "adhoc-batch", 0, "sleep 0.05");
    if (n / 10).is_multiple_of(2) {
        let tasks: Vec<_> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| submission(id, i, &spec))
            .collect();
        // The API may be down (killed, or the database away): the same ids again are safe.
        for _ in 0..3 {
            let sent = http
                .post(format!("{api_url}/api/v1/tasks/batch"))
                .json(&json!({ "tasks": tasks }))
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => return ids,
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        return Vec::new();
    }
    let Some(channel) = channel else {
        return Vec::new();
    };
    let exchange = topology.submit_exchange();
    let mut confirms = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let mut body = submission(id, i, &spec);
        body["v"] = json!(1);
        let Ok(body) = serde_json::to_vec(&body) else {
            continue;
        };
        let published = channel
            .basic_publish(
                exchange.as_str().into(),
                exchange.as_str().into(),
                lapin::options::BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &body,
                chime_core::bus::publish::message_properties(FieldTable::default()),
            )
            .await;
        match published {
            Ok(confirm) => confirms.push((*id, confirm)),
            Err(_) => break,
        }
    }
    let mut accepted = Vec::new();
    for (id, confirm) in confirms {
        let confirmed = tokio::time::timeout(Duration::from_secs(5), confirm).await;
        if let Ok(Ok(confirmation)) = confirmed
            && chime_core::bus::publish::check_confirmation(confirmation, &exchange, &exchange)
                .is_ok()
        {
            accepted.push(id);
        }
    }
    accepted
}

/// The `i`th submission of a batch: a shell command that logs its run, or (odd `i`) a noop.
fn submission(id: &Uuid, i: usize, spec: &serde_json::Value) -> serde_json::Value {
    if i % 2 == 1 {
        json!({ "id": id, "kind": "noop" })
    } else {
        json!({ "id": id, "kind": "shell", "spec": spec, "requests_recovery": true })
    }
}

/// Kills the newest live task of the longest job through the API (best effort: a fault may be
/// in the way).
async fn kill_one(
    http: &reqwest::Client,
    api_url: &str,
    store: &Store,
    activity: &Arc<Mutex<Activity>>,
) {
    let victim: Option<Uuid> = sqlx::query_scalar(
        "SELECT t.id FROM tasks t JOIN jobs j ON j.id = t.job_id
         WHERE j.name = 'ok-3' AND t.status IN ('ready', 'running')
         ORDER BY t.id DESC LIMIT 1",
    )
    .fetch_optional(store.pool())
    .await
    .ok()
    .flatten();
    let Some(id) = victim else {
        return;
    };
    if let Ok(response) = http
        .post(format!("{api_url}/api/v1/tasks/{id}/kill"))
        .json(&json!({}))
        .send()
        .await
        && response.status().is_success()
        && let Ok(mut activity) = activity.lock()
    {
        activity.kills += 1;
    }
}
