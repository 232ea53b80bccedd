//! What must hold after the faults stop and the system settles, checked from the database and
//! from the side-effect log every executed attempt appended to.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use anyhow::Result;
use chime_core::Store;
use chime_core::schedule::{Calendar, CalendarSpec, Schedule, ScheduleSpec};
use jiff::{SignedDuration, Timestamp};
use sqlx::types::Json;
use uuid::Uuid;

use crate::workload::{CHAOS_GROUP, DAYS, DIAMOND, ONE_AT_A_TIME, POISON};

/// One attempt as the side-effect log saw it.
#[derive(Debug, Default, Clone)]
struct Run {
    starts: Vec<i128>,
    /// The last moment it was seen running (its last line of any kind).
    last: i128,
    job: String,
}

/// Whether runs, in order of their first start, overlap: one starts before an earlier one was
/// last seen running. Returns the first such pair's indexes.
fn first_overlap(runs: &[&Run]) -> Option<(usize, usize)> {
    let mut latest: Option<(usize, i128)> = None;
    for (i, run) in runs.iter().enumerate() {
        let start = run.starts.first().copied().unwrap_or(run.last);
        if let Some((j, last)) = latest
            && start < last
        {
            return Some((j, i));
        }
        if latest.is_none_or(|(_, last)| run.last > last) {
            latest = Some((i, run.last));
        }
    }
    None
}

/// Counts for the summary line.
#[derive(Debug, Default)]
pub struct Totals {
    /// Fires recorded.
    pub fires: i64,
    /// Tasks.
    pub tasks: i64,
    /// Attempts executed (log starts).
    pub executed: usize,
}

/// Checks every invariant; returns the totals and each violation, in full.
pub async fn check(
    store: &Store,
    log: &Path,
    paused_at: Timestamp,
    submitted: &[Uuid],
    dead_letters: i64,
) -> Result<(Totals, Vec<String>)> {
    let mut violations = Vec::new();
    let runs = read_log(log)?;
    let mut totals = Totals {
        executed: runs.values().map(|r| r.starts.len()).sum(),
        ..Totals::default()
    };
    totals.fires = sqlx::query_scalar("SELECT count(*) FROM fired_triggers")
        .fetch_one(store.pool())
        .await?;
    totals.tasks = sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(store.pool())
        .await?;
    // The log is the witness of what ran: a harness whose commands cannot write it would pass
    // every check on it vacuously.
    let succeeded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM task_attempts WHERE outcome = 'succeeded'")
            .fetch_one(store.pool())
            .await?;
    if succeeded > 0 && totals.executed == 0 {
        violations.push(format!(
            "3: {succeeded} attempts succeeded but the log of executed commands is empty"
        ));
    }
    fires_exactly_once(store, paused_at, &mut violations).await?;
    every_task_terminal(store, submitted, &mut violations).await?;
    nothing_ran_twice(store, &runs, &mut violations).await?;
    one_at_a_time(store, &runs, &mut violations).await?;
    diamond_advanced_once(store, &mut violations).await?;
    let unsent = chime_core::store::outbox::unsent_count(store).await?;
    if unsent != 0 {
        violations.push(format!("6: {unsent} outbox rows were never published"));
    }
    if dead_letters != POISON {
        violations.push(format!(
            "6: {dead_letters} dead letters, but the run sent {POISON} poison messages"
        ));
    }
    Ok((totals, violations))
}

/// Invariant 1: Each (trigger, scheduled time) fired once, and none is missing against the schedule engine
/// (from each periodic trigger's start until a little before the triggers were paused).
async fn fires_exactly_once(
    store: &Store,
    paused_at: Timestamp,
    violations: &mut Vec<String>,
) -> Result<()> {
    let twice: Vec<(i64, jiff_sqlx::Timestamp, i64)> = sqlx::query_as(
        "SELECT trigger_id, sched_time, count(*) FROM fired_triggers
         GROUP BY trigger_id, sched_time HAVING count(*) > 1",
    )
    .fetch_all(store.pool())
    .await?;
    for (trigger, at, n) in twice {
        violations.push(format!(
            "1: trigger {trigger} fired {n} times for {}",
            at.to_jiff()
        ));
    }
    #[derive(sqlx::FromRow)]
    struct Trigger {
        id: i64,
        name: String,
        schedule: Json<ScheduleSpec>,
        start_time: jiff_sqlx::Timestamp,
        calendar: Option<Json<CalendarSpec>>,
        job: String,
    }
    let triggers: Vec<Trigger> = sqlx::query_as(
        "SELECT t.id, t.name, t.schedule, t.start_time, c.definition AS calendar, j.name AS job
         FROM triggers t JOIN jobs j ON j.id = t.job_id
         LEFT JOIN calendars c ON c.name = t.calendar_name
         WHERE t.group_name = $1",
    )
    .bind(CHAOS_GROUP)
    .fetch_all(store.pool())
    .await?;
    let until = paused_at - SignedDuration::from_secs(5);
    for trigger in triggers {
        let start = trigger.start_time.to_jiff();
        let schedule = Schedule::compile(&trigger.schedule.0, start)?;
        let calendar = trigger
            .calendar
            .as_ref()
            .map(|c| Calendar::compile(&c.0))
            .transpose()?;
        let expected: BTreeSet<Timestamp> = schedule
            .fire_times_between(calendar.as_ref(), start, until, 100_000)
            .into_iter()
            .collect();
        let fired: BTreeSet<Timestamp> = sqlx::query_scalar::<_, jiff_sqlx::Timestamp>(
            "SELECT sched_time FROM fired_triggers WHERE trigger_id = $1 AND sched_time <= $2",
        )
        .bind(trigger.id)
        .bind(jiff_sqlx::Timestamp::from(until))
        .fetch_all(store.pool())
        .await?
        .into_iter()
        .map(|t| t.to_jiff())
        .collect();
        // A non-concurrent job's fire held while its job runs may pass the misfire threshold and
        // follow its misfire policy (a simple trigger is rescheduled): only its duplicates are
        // wrong, and those are checked above.
        if ONE_AT_A_TIME.contains(&trigger.job.as_str()) {
            continue;
        }
        let extra: Vec<_> = fired.difference(&expected).collect();
        if !extra.is_empty() {
            violations.push(format!(
                "1: trigger {} fired at times its schedule does not have: {extra:?}",
                trigger.name
            ));
        }
        let missing: Vec<_> = expected.difference(&fired).collect();
        if !missing.is_empty() {
            violations.push(format!(
                "1: trigger {} never fired for {} scheduled times: {missing:?}",
                trigger.name,
                missing.len()
            ));
        }
    }
    Ok(())
}

/// Invariant 2: Every task is terminal, and every accepted submission is a task.
async fn every_task_terminal(
    store: &Store,
    submitted: &[Uuid],
    violations: &mut Vec<String>,
) -> Result<()> {
    let stuck: Vec<(Uuid, String, Option<String>)> = sqlx::query_as(
        "SELECT t.id, t.status, j.name FROM tasks t LEFT JOIN jobs j ON j.id = t.job_id
         WHERE t.status NOT IN ('succeeded', 'failed', 'killed')",
    )
    .fetch_all(store.pool())
    .await?;
    for (id, status, job) in stuck {
        violations.push(format!("2: task {id} ({job:?}) is still {status}"));
    }
    let known: BTreeSet<Uuid> = sqlx::query_scalar("SELECT id FROM tasks WHERE id = ANY($1)")
        .bind(submitted)
        .fetch_all(store.pool())
        .await?
        .into_iter()
        .collect();
    for id in submitted.iter().filter(|id| !known.contains(id)) {
        violations.push(format!("2: submission {id} was accepted but is no task"));
    }
    Ok(())
}

/// Invariant 3: No attempt ran twice, no task ran twice at the same time, a task ran again only after an
/// attempt that failed, was rejected or was lost (and then only if it may: recovery, or budget),
/// and at most one attempt per task succeeded.
async fn nothing_ran_twice(
    store: &Store,
    runs: &BTreeMap<(Uuid, i32), Run>,
    violations: &mut Vec<String>,
) -> Result<()> {
    let mut by_task: HashMap<Uuid, Vec<(i32, &Run)>> = HashMap::new();
    for ((task, attempt), run) in runs {
        if run.starts.len() > 1 {
            violations.push(format!(
                "3: attempt {attempt} of task {task} ({}) started {} times",
                run.job,
                run.starts.len()
            ));
        }
        by_task.entry(*task).or_default().push((*attempt, run));
    }
    for (task, mut attempts) in by_task {
        attempts.sort_by_key(|(_, run)| run.starts.first().copied().unwrap_or(run.last));
        let ordered: Vec<&Run> = attempts.iter().map(|(_, run)| *run).collect();
        if let Some((i, j)) = first_overlap(&ordered) {
            violations.push(format!(
                "3: task {task} ({}) ran attempts {} and {} at the same time",
                ordered[i].job, attempts[i].0, attempts[j].0
            ));
        }
    }
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM task_attempts a JOIN tasks t ON t.id = a.task_id
         WHERE a.outcome IS NULL",
    )
    .fetch_one(store.pool())
    .await?;
    if open > 0 {
        violations.push(format!("3: {open} attempts were never closed"));
    }
    let doubles: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT task_id, count(*) FROM task_attempts WHERE outcome = 'succeeded'
         GROUP BY task_id HAVING count(*) > 1",
    )
    .fetch_all(store.pool())
    .await?;
    for (task, n) in doubles {
        violations.push(format!("3: task {task} has {n} succeeded attempts"));
    }
    let unjustified: Vec<(Uuid, i32, Option<String>)> = sqlx::query_as(
        "SELECT a.task_id, a.attempt, a.outcome FROM task_attempts a JOIN tasks t ON t.id = a.task_id
         WHERE a.attempt < t.attempt
           AND NOT (coalesce(a.outcome, 'open') IN ('failed', 'rejected')
                    OR (a.outcome = 'lost' AND (t.requests_recovery OR t.failed_retries > 0
                                                OR a.error LIKE '%never ran%')))",
    )
    .fetch_all(store.pool())
    .await?;
    for (task, attempt, outcome) in unjustified {
        violations.push(format!(
            "3: task {task} ran again after attempt {attempt} ended {outcome:?}"
        ));
    }
    Ok(())
}

/// Invariant 4: Non-concurrent jobs never had two live tasks, nor two running commands, at once.
async fn one_at_a_time(
    store: &Store,
    runs: &BTreeMap<(Uuid, i32), Run>,
    violations: &mut Vec<String>,
) -> Result<()> {
    for job in ONE_AT_A_TIME {
        // Each task's life from its first start to its end, on the database's clock: a task can
        // start only after its message was published, which follows the commit that made it
        // ready, which follows (under the job's lock) the commit that ended the task before.
        let lives: Vec<(Uuid, jiff_sqlx::Timestamp, Option<jiff_sqlx::Timestamp>)> =
            sqlx::query_as(
                "SELECT t.id, min(a.started_at) AS started, t.finished_at
                 FROM tasks t JOIN jobs j ON j.id = t.job_id
                 JOIN task_attempts a ON a.task_id = t.id
                 WHERE j.name = $1 GROUP BY t.id, t.finished_at ORDER BY started",
            )
            .bind(job)
            .fetch_all(store.pool())
            .await?;
        let mut latest: Option<(Uuid, Option<Timestamp>)> = None;
        for (id, started, finished) in lives {
            let started = started.to_jiff();
            if let Some((before, ended)) = latest
                && ended.is_none_or(|end| started < end)
            {
                violations.push(format!(
                    "4: {job}: task {id} started at {started} while task {before} was live \
                     (ended {ended:?})"
                ));
            }
            let finished = finished.map(|t| t.to_jiff());
            if latest.is_none_or(|(_, ended)| ended.is_some_and(|e| finished.is_none_or(|f| f > e)))
            {
                latest = Some((id, finished));
            }
        }
        let mut spans: Vec<&Run> = runs.values().filter(|r| r.job == job).collect();
        spans.sort_by_key(|r| r.starts.first().copied().unwrap_or(r.last));
        if first_overlap(&spans).is_some() {
            violations.push(format!("4: {job}: two commands ran at once"));
        }
    }
    Ok(())
}

/// Invariant 5: Each downstream (job, day) of the diamond advanced once, into one task that succeeded.
async fn diamond_advanced_once(store: &Store, violations: &mut Vec<String>) -> Result<()> {
    for job in DIAMOND {
        for day in DAYS {
            let day: Timestamp = day.parse()?;
            let tasks: Vec<String> = sqlx::query_scalar(
                "SELECT t.status FROM tasks t JOIN jobs j ON j.id = t.job_id
                 WHERE j.name = $1 AND t.data_time = $2",
            )
            .bind(job)
            .bind(jiff_sqlx::Timestamp::from(day))
            .fetch_all(store.pool())
            .await?;
            if tasks != ["succeeded"] {
                violations.push(format!(
                    "5: {job} for {day}: tasks {tasks:?}, not one succeeded"
                ));
            }
            let advances: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM dependency_advances a JOIN jobs j ON j.id = a.job_id
                 WHERE j.name = $1 AND a.data_time = $2 AND a.outcome = 'ready'",
            )
            .bind(job)
            .bind(jiff_sqlx::Timestamp::from(day))
            .fetch_one(store.pool())
            .await?;
            if advances != 1 {
                violations.push(format!("5: {job} for {day} advanced {advances} times"));
            }
        }
    }
    Ok(())
}

/// The side-effect log, by (task, attempt).
fn read_log(path: &Path) -> Result<BTreeMap<(Uuid, i32), Run>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading the side-effect log {}: {e}", path.display()))?;
    let mut runs: BTreeMap<(Uuid, i32), Run> = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [what, task, attempt, job, at] = fields[..] else {
            continue;
        };
        let (Ok(task), Ok(attempt), Ok(at)) = (
            task.parse::<Uuid>(),
            attempt.parse::<i32>(),
            at.parse::<i128>(),
        ) else {
            continue;
        };
        let run = runs.entry((task, attempt)).or_default();
        run.job = job.to_string();
        run.last = run.last.max(at);
        if what == "start" {
            run.starts.push(at);
        }
    }
    Ok(runs)
}
