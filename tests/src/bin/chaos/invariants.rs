//! What must hold after the faults stop and the system settles, checked from the database, from
//! the side-effect log every executed command appended to, and from the ledger of faults. Each
//! check can fail: `--self-test` breaks each one on purpose and shows it reported. None restates
//! what the schema enforces (a unique key, a primary key).
//!
//! 1. Fires: every scheduled time of every periodic trigger fired, and none that is not
//!    scheduled. The expected times come from chime's own engine (checked against Quartz's output
//!    elsewhere), and for simple and calendar-interval triggers also from plain arithmetic,
//!    which must agree with it. No fire is later than [`LATE_BOUND_S`] after its time, or after
//!    the end of a database fault that covered it. Every fire made its task, and no other fire
//!    the same task. Every fire's message was published, and its task started, within
//!    [`START_BOUND_S`] of when it could be (after its time, after the faults that held it).
//! 2. Tasks: every task ended and every accepted submission is a task; a task failed only as the
//!    workload makes it fail (never: every job succeeds by its last attempt) or after an attempt
//!    lost for a reason the ledger explains; killed only when a kill was asked for. A noop task
//!    (nothing to run, never `running`) succeeded at its first attempt, with one attempt row. A
//!    task that `requests_recovery` never fails for a lost attempt (each loss makes it run again).
//! 3. Runs: the side-effect log and the attempts agree both ways (every attempt that ran a
//!    command has its start, every start an attempt); no attempt started twice, and no task ran
//!    two attempts at once, judged from the log; every attempt was closed, at most one
//!    succeeded, a task ran again only after an attempt that allowed it; an attempt was lost only
//!    when its worker was killed, terminated, frozen or cut off from PostgreSQL around it, and
//!    never recorded as "never ran" when its command logged a start.
//! 4. One at a time: non-concurrent jobs never had two live tasks, nor two running commands.
//! 5. The diamond, fed for the whole run: each downstream job ran once, successfully, for each
//!    whole minute the feed covered, each fold after every feed of its minute had ended, and the
//!    join after both its upstreams had ended.
//! 6. Nothing left: every outbox row published, and only the poison messages dead-lettered.
//!
//! Each violation starts with the sub-check that found it, and `--self-test` plants a case for
//! every one, counted only when that sub-check reports it:
//!
//! | id | reports |
//! | --- | --- |
//! | 1a | a fire later than the bound |
//! | 1b | the engine and plain arithmetic disagree on a trigger's times |
//! | 1c | a fire at a time the schedule does not have |
//! | 1d | a scheduled time that never fired |
//! | 1e | a fire whose task is missing, or shared with another fire |
//! | 1f | a fire's message published late, with nothing to hold it |
//! | 1g | a fire's task started late after its message, with nothing to hold it |
//! | 2a | a task that never ended |
//! | 2b | an accepted submission that is no task |
//! | 2c | a failure nothing explains |
//! | 2d | a kill nobody asked for |
//! | 2e | a noop task not done at its first attempt |
//! | 2f | a `requests_recovery` task that ended failed because an attempt was lost |
//! | 3a | an attempt that ran its command without its log lines |
//! | 3b | a command logged for no attempt |
//! | 3c | an attempt lost while its worker was fine (no fault of its own in the attempt's span) |
//! | 3d | an attempt started twice |
//! | 3e | two attempts of a task at once |
//! | 3f | an attempt never closed |
//! | 3g | two succeeded attempts of a task |
//! | 3h | a task run again after an attempt that did not allow it |
//! | 3i | an attempt recorded as never run whose command logged its start |
//! | 4a | two live tasks of a non-concurrent job |
//! | 4b | two commands of a non-concurrent job at once |
//! | 5a | a diamond job's minute without one succeeded task |
//! | 5b | the join started before its upstreams ended |
//! | 5c | the feed covered no whole minute |
//! | 5d | a fold started before the last feed of its minute ended |
//! | 6a | an outbox row never published |
//! | 6b | poison messages the run could not send |
//! | 6c | dead letters other than the poison messages |

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use anyhow::Result;
use chime_core::Store;
use chime_core::schedule::{Calendar, CalendarSpec, Schedule, ScheduleSpec};
use jiff::{SignedDuration, Timestamp};
use sqlx::types::Json;
use uuid::Uuid;

use crate::faults::Ledger;
use crate::workload::{CHAOS_GROUP, DIAMOND, FEED, ONE_AT_A_TIME, POISON, poison_body};

/// How many invariants there are.
pub const COUNT: usize = 6;
/// How late a fire may be, in seconds, after its time or after a database fault that covered it.
pub const LATE_BOUND_S: i64 = 15;

/// How long after its time a fire's message may be published, and after that its task start,
/// in seconds, beyond the faults that held it.
pub const START_BOUND_S: i64 = 30;
/// How long a relay's claim on an outbox row holds it from other relays, as `bus/relay.rs`
/// sets it: a frozen or killed relay holds what it claimed this long at most.
pub const RELAY_LEASE_S: i64 = 30;

/// How far apart, in ms, the ledger's record of a fault and the database's record of what it
/// did may be and still be one moment: a fault is recorded just before it is applied and just
/// after it is lifted, and the database stamps a transaction at its start.
pub const CLOCK_SLACK_MS: i64 = 1000;

/// How long after a database fault ends it still explains a worker letting its attempts go
/// (`never ran`, `interrupted`), in seconds: a server just back answers everyone reconnecting
/// at once, slowly; a worker cut off from it alone, or refused, may take a message under a
/// lease that runs out before its start commits, and lets that attempt go unrun (`never ran`)
/// once it is back. A process fault explains any other loss only within the attempt's own span.
pub const DATABASE_AFTERMATH_S: i64 = 10;

/// What the checks read.
pub struct Evidence<'a> {
    /// The run's store.
    pub store: &'a Store,
    /// The side-effect log.
    pub log: &'a Path,
    /// When the triggers were paused.
    pub paused_at: Timestamp,
    /// Accepted submissions.
    pub submitted: &'a [Uuid],
    /// The bodies of the messages in the dead-letter queue.
    pub dead_letters: &'a [Vec<u8>],
    /// Poison messages confirmed, and sent at all.
    pub poison: (i64, i64),
    /// The faults.
    pub faults: &'a Ledger,
}

/// One attempt as the side-effect log saw it.
#[derive(Debug, Default, Clone)]
struct Run {
    starts: Vec<i128>,
    /// Whether its command logged its end.
    ended: bool,
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
    /// The latest fire, in milliseconds after its scheduled time.
    pub latest_fire_ms: i64,
    /// Attempts lost, each explained by a fault.
    pub lost: usize,
    /// How long after its time (or its fire, if later) each checked fire's task first started,
    /// in ms, in order.
    pub start_delays_ms: Vec<i64>,
}

impl Totals {
    /// The `q` quantile (0 to 1) of [`Totals::start_delays_ms`], 0 when there is none.
    pub fn start_delay_ms(&self, q: f64) -> i64 {
        let n = self.start_delays_ms.len();
        if n == 0 {
            return 0;
        }
        self.start_delays_ms[((n - 1) as f64 * q).round() as usize]
    }
}

/// Checks every invariant; returns the totals and each violation, in full.
pub async fn check(evidence: &Evidence<'_>) -> Result<(Totals, Vec<String>)> {
    let store = evidence.store;
    let mut violations = Vec::new();
    let runs = read_log(evidence.log)?;
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
    totals.latest_fire_ms = fires_on_time(evidence, &mut violations).await?;
    every_fire_made(evidence, &mut violations).await?;
    every_fire_one_task(store, &mut violations).await?;
    totals.start_delays_ms = fires_started(evidence, &mut violations).await?;
    every_task_ended(evidence, &mut violations).await?;
    log_matches_attempts(store, &runs, &mut violations).await?;
    nothing_ran_twice(store, &runs, &mut violations).await?;
    totals.lost = losses_explained(evidence, &mut violations).await?;
    never_ran_means_never_started(store, &runs, &mut violations).await?;
    one_at_a_time(store, &runs, &mut violations).await?;
    diamond_fed_all_run(evidence, &mut violations).await?;
    let unsent = chime_core::store::outbox::unsent_count(store).await?;
    if unsent != 0 {
        violations.push(format!("6a: {unsent} outbox rows were never published"));
    }
    let (confirmed, sent) = evidence.poison;
    if confirmed < POISON {
        violations.push(format!(
            "6b: the run could send only {confirmed} of its {POISON} poison messages"
        ));
    }
    // Message by message: each dead letter is a poison message (one whose confirm a fault took
    // may be there twice), and each poison message the broker confirmed is there.
    let strangers: Vec<String> = evidence
        .dead_letters
        .iter()
        .filter(|body| !(0..POISON).any(|n| poison_body(n) == **body))
        .map(|body| String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned())
        .collect();
    let missing: Vec<i64> = (0..confirmed)
        .filter(|n| !evidence.dead_letters.contains(&poison_body(*n)))
        .collect();
    if !strangers.is_empty() || !missing.is_empty() || evidence.dead_letters.len() as i64 > sent {
        violations.push(format!(
            "6c: {} dead letters for {confirmed} poison messages confirmed ({sent} sent): {} not \
             poison, e.g. {:?}; poison messages missing: {missing:?}",
            evidence.dead_letters.len(),
            strangers.len(),
            &strangers[..strangers.len().min(3)]
        ));
    }
    Ok((totals, violations))
}

/// Invariant 1, lateness: no fire later than [`LATE_BOUND_S`] after its time, or after the end of
/// a database fault whose window (widened by the bound) holds its time. Non-concurrent jobs'
/// triggers wait for their job on purpose and are left out. Returns the latest fire, in ms.
async fn fires_on_time(evidence: &Evidence<'_>, violations: &mut Vec<String>) -> Result<i64> {
    let fires: Vec<(String, jiff_sqlx::Timestamp, jiff_sqlx::Timestamp)> = sqlx::query_as(
        "SELECT t.name, f.sched_time, f.fired_time FROM fired_triggers f
         JOIN triggers t ON t.id = f.trigger_id JOIN jobs j ON j.id = t.job_id
         WHERE t.group_name = $1 AND NOT j.name = ANY($2)",
    )
    .bind(CHAOS_GROUP)
    .bind(ONE_AT_A_TIME.map(String::from).to_vec())
    .fetch_all(evidence.store.pool())
    .await?;
    let bound = SignedDuration::from_secs(LATE_BOUND_S);
    let windows = evidence.faults.database_windows();
    let mut latest = 0;
    let mut late = Vec::new();
    for (trigger, scheduled, fired) in fires {
        let (scheduled, fired) = (scheduled.to_jiff(), fired.to_jiff());
        let by = fired.duration_since(scheduled).as_millis() as i64;
        latest = latest.max(by);
        let allowed = fire_deadline(scheduled, bound, &windows);
        if fired > allowed {
            late.push(format!("{trigger} at {scheduled} fired {by} ms late"));
        }
    }
    if !late.is_empty() {
        violations.push(format!(
            "1a: {} fires came later than {LATE_BOUND_S} s after their time (or after the \
             database fault that held them), e.g. {:?}",
            late.len(),
            &late[..late.len().min(5)]
        ));
    }
    Ok(latest)
}

/// When a fire scheduled at `scheduled` must have been made: `bound` after its time, or after
/// the end of a database fault that began before that deadline and ended after the fire's time
/// — and so on, since a fault that began while an earlier one still held the fire holds it
/// too (a PostgreSQL too slow to fire, then stopped before it caught up).
fn fire_deadline(
    scheduled: Timestamp,
    bound: SignedDuration,
    windows: &[(Timestamp, Timestamp)],
) -> Timestamp {
    let mut deadline = scheduled + bound;
    loop {
        let later = windows
            .iter()
            .filter(|(from, to)| *from <= deadline && scheduled <= *to)
            .map(|(_, to)| *to + bound)
            .fold(deadline, Timestamp::max);
        if later == deadline {
            return deadline;
        }
        deadline = later;
    }
}

/// Invariant 1: every scheduled time fired, none that is not scheduled (from each periodic
/// trigger's start until a little before the triggers were paused); for simple and
/// calendar-interval triggers, plain arithmetic agrees with the engine.
async fn every_fire_made(evidence: &Evidence<'_>, violations: &mut Vec<String>) -> Result<()> {
    let store = evidence.store;
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
    let until = evidence.paused_at - SignedDuration::from_secs(5);
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
        if let Some(counted) = by_arithmetic(&trigger.schedule.0, start, until, calendar.is_some())
            && counted != expected
        {
            let only_engine: Vec<_> = expected.difference(&counted).take(3).collect();
            let only_counted: Vec<_> = counted.difference(&expected).take(3).collect();
            violations.push(format!(
                "1b: trigger {}: the engine and plain arithmetic disagree (engine only: \
                 {only_engine:?}; arithmetic only: {only_counted:?})",
                trigger.name
            ));
        }
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
        // follow its misfire policy (a simple trigger is rescheduled).
        if ONE_AT_A_TIME.contains(&trigger.job.as_str()) {
            continue;
        }
        let extra: Vec<_> = fired.difference(&expected).collect();
        if !extra.is_empty() {
            violations.push(format!(
                "1c: trigger {} fired at times its schedule does not have: {extra:?}",
                trigger.name
            ));
        }
        let missing: Vec<_> = expected.difference(&fired).collect();
        if !missing.is_empty() {
            violations.push(format!(
                "1d: trigger {} never fired for {} scheduled times: {missing:?}",
                trigger.name,
                missing.len()
            ));
        }
    }
    Ok(())
}

/// Invariant 1, a fire's task on its way: its message published no later than
/// [`START_BOUND_S`] after its time (1f), and its first attempt started no later than
/// [`START_BOUND_S`] after that (1g), or after the faults that held it. The periodic triggers'
/// fires, less the non-concurrent jobs', whose tasks wait for each other on purpose. Returns
/// how long after its time each task first started (ms, ascending).
///
/// What may hold each step: any relay may have claimed the message (every process runs one), and
/// a frozen, cut off or killed one holds it until its claim's lease ends, [`RELAY_LEASE_S`]; the
/// database and the broker, away or slow, hold both steps; only the task's own group's workers
/// hold its start. Anything else (a backlog, slots left idle, a message nobody consumes) is a
/// violation: the workload keeps each group within what one of its workers carries.
async fn fires_started(evidence: &Evidence<'_>, violations: &mut Vec<String>) -> Result<Vec<i64>> {
    type Fire = (
        String,
        String,
        jiff_sqlx::Timestamp,
        Option<jiff_sqlx::Timestamp>,
        Option<jiff_sqlx::Timestamp>,
    );
    let fires: Vec<Fire> = sqlx::query_as(
        "WITH published AS (
             SELECT (body->>'task_id')::uuid AS task_id, min(published_at) AS at FROM outbox
             WHERE headers ? 'x-chime-scheduled-time' AND body->>'attempt' = '1' GROUP BY 1
         ), started AS (
             SELECT task_id, min(started_at) AS at FROM task_attempts GROUP BY 1
         )
         SELECT t.name, j.worker_group, greatest(f.sched_time, f.fired_time), p.at, s.at
         FROM fired_triggers f JOIN triggers t ON t.id = f.trigger_id
         JOIN jobs j ON j.id = t.job_id
         LEFT JOIN published p ON p.task_id = f.task_id
         LEFT JOIN started s ON s.task_id = f.task_id
         WHERE t.group_name = $1 AND NOT j.name = ANY($2) AND f.state = 'fired'",
    )
    .bind(CHAOS_GROUP)
    .bind(ONE_AT_A_TIME.map(String::from).to_vec())
    .fetch_all(evidence.store.pool())
    .await?;
    let bound = SignedDuration::from_secs(START_BOUND_S);
    let relay_lease = SignedDuration::from_secs(RELAY_LEASE_S);
    let everyone = evidence.faults.database_windows();
    // A relay that claimed a row holds it until it marks it sent or its claim's lease ends (then
    // another relay's next poll, within a second, takes it): a relay frozen or cut off holds it
    // for the fault or the lease, whichever ends first; one killed, for the whole lease; and a
    // claim whose mark a database fault refused, until the fault or the lease ends, whichever
    // ends last.
    let poll = SignedDuration::from_secs(1);
    let mut relays: Vec<(Timestamp, Timestamp)> = everyone
        .iter()
        .map(|(from, to)| (*from, (*to).max(*from + relay_lease) + poll))
        .collect();
    relays.extend(evidence.faults.broker_windows());
    relays.extend(
        evidence
            .faults
            .records
            .iter()
            .filter(|r| r.service.is_some())
            .map(|r| {
                let held = if r.to > r.from {
                    r.to.min(r.from + relay_lease)
                } else {
                    r.from + relay_lease
                };
                (r.from, held + poll)
            }),
    );
    let mut starts = BTreeMap::<&str, Vec<(Timestamp, Timestamp)>>::new();
    let mut late_publish = Vec::new();
    let mut late_start = Vec::new();
    let mut delays = Vec::new();
    for (trigger, group, due, published, started) in &fires {
        let due = due.to_jiff();
        let (Some(published), Some(started)) = (published, started) else {
            // Never published or never started: 6a and 2a report those.
            continue;
        };
        let (published, started) = (published.to_jiff(), started.to_jiff());
        delays.push(started.duration_since(due).as_millis() as i64);
        if published > fire_deadline(due, bound, &relays) {
            late_publish.push(format!(
                "{trigger} due {due} published {} ms late",
                published.duration_since(due).as_millis()
            ));
        }
        let windows = starts.entry(group.as_str()).or_insert_with(|| {
            let mut windows = everyone.clone();
            windows.extend(evidence.faults.broker_windows());
            windows.extend(
                evidence
                    .faults
                    .records
                    .iter()
                    .filter(|r| {
                        crate::cluster::WORKERS.iter().any(|(name, of, _)| {
                            *of == group.as_str() && r.service.as_deref() == Some(*name)
                        })
                    })
                    .map(|r| (r.from, r.to)),
            );
            windows
        });
        if started > fire_deadline(published, bound, windows) {
            late_start.push(format!(
                "{trigger} ({group}) published {published} started {} ms after",
                started.duration_since(published).as_millis()
            ));
        }
    }
    for (id, what, late) in [
        ("1f", "fires were published", late_publish),
        ("1g", "fires' tasks started", late_start),
    ] {
        if !late.is_empty() {
            violations.push(format!(
                "{id}: {} {what} later than {START_BOUND_S} s after they could be (nothing \
                 held them), e.g. {:?}",
                late.len(),
                &late[..late.len().min(5)]
            ));
        }
    }
    delays.sort_unstable();
    Ok(delays)
}

/// Invariant 1: every fire made its task, in its transaction, and no two fires share one.
async fn every_fire_one_task(store: &Store, violations: &mut Vec<String>) -> Result<()> {
    let taskless: Vec<(i64, Option<Uuid>)> = sqlx::query_as(
        "SELECT f.id, f.task_id FROM fired_triggers f LEFT JOIN tasks t ON t.id = f.task_id
         WHERE f.state = 'fired' AND t.id IS NULL ORDER BY f.id LIMIT 5",
    )
    .fetch_all(store.pool())
    .await?;
    if !taskless.is_empty() {
        violations.push(format!(
            "1e: fires whose task does not exist (fire, task): {taskless:?}"
        ));
    }
    let shared: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT task_id, count(*) FROM fired_triggers WHERE task_id IS NOT NULL
         GROUP BY task_id HAVING count(*) > 1 LIMIT 5",
    )
    .fetch_all(store.pool())
    .await?;
    if !shared.is_empty() {
        violations.push(format!(
            "1e: tasks made by more than one fire (task, fires): {shared:?}"
        ));
    }
    Ok(())
}

/// The fire times of a simple or second-based calendar-interval trigger, counted without the
/// engine: its start plus whole intervals, less the seconds the workload's calendar excludes
/// (the last ten of every minute). None for the other kinds.
fn by_arithmetic(
    schedule: &ScheduleSpec,
    start: Timestamp,
    until: Timestamp,
    quiet: bool,
) -> Option<BTreeSet<Timestamp>> {
    let step_ms: i64 = match serde_json::to_value(schedule).ok()? {
        value if value["kind"] == "simple" => value["interval_ms"].as_i64()?,
        value if value["kind"] == "calendar_interval" && value["unit"] == "second" => {
            value["interval"].as_i64()? * 1000
        }
        _ => return None,
    };
    let mut times = BTreeSet::new();
    let mut at = start;
    while at <= until && step_ms > 0 {
        if !(quiet && at.as_second().rem_euclid(60) >= 50) {
            times.insert(at);
        }
        at = at.checked_add(SignedDuration::from_millis(step_ms)).ok()?;
    }
    Some(times)
}

/// Invariant 2: every task ended, every accepted submission is a task, and every failure or
/// kill is one the run explains.
async fn every_task_ended(evidence: &Evidence<'_>, violations: &mut Vec<String>) -> Result<()> {
    let store = evidence.store;
    let stuck: Vec<(Uuid, String, Option<String>)> = sqlx::query_as(
        "SELECT t.id, t.status, j.name FROM tasks t LEFT JOIN jobs j ON j.id = t.job_id
         WHERE t.status NOT IN ('succeeded', 'failed', 'killed')",
    )
    .fetch_all(store.pool())
    .await?;
    for (id, status, job) in stuck {
        violations.push(format!("2a: task {id} ({job:?}) is still {status}"));
    }
    let known: BTreeSet<Uuid> = sqlx::query_scalar("SELECT id FROM tasks WHERE id = ANY($1)")
        .bind(evidence.submitted)
        .fetch_all(store.pool())
        .await?
        .into_iter()
        .collect();
    for id in evidence.submitted.iter().filter(|id| !known.contains(id)) {
        violations.push(format!("2b: submission {id} was accepted but is no task"));
    }
    // Every job of the workload succeeds by its last attempt: a failure other than a lost
    // attempt with no budget left (whose loss invariant 3 explains) is unexpected (2c), and so
    // is a kill nobody asked for (2d).
    let unexplained: Vec<(Uuid, String, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT t.id, t.status, t.reason, j.name FROM tasks t LEFT JOIN jobs j ON j.id = t.job_id
         WHERE (t.status = 'failed' AND t.reason IS DISTINCT FROM 'lost')
            OR (t.status = 'killed' AND t.kill_requested_at IS NULL)",
    )
    .fetch_all(store.pool())
    .await?;
    for (id, status, reason, job) in unexplained {
        let check = if status == "killed" { "2d" } else { "2c" };
        violations.push(format!(
            "{check}: task {id} ({job:?}) ended {status} ({reason:?}), which nothing in the run \
             explains"
        ));
    }
    // A loss re-runs a task that requests recovery, whatever its failed budget.
    let unrecovered: Vec<(Uuid, Option<String>)> = sqlx::query_as(
        "SELECT t.id, j.name FROM tasks t LEFT JOIN jobs j ON j.id = t.job_id
         WHERE t.requests_recovery AND t.status = 'failed' AND t.reason = 'lost'",
    )
    .fetch_all(store.pool())
    .await?;
    for (id, job) in unrecovered {
        violations.push(format!(
            "2f: task {id} ({job:?}) requests recovery but ended failed for a lost attempt"
        ));
    }
    // Nothing can happen to a noop while it "runs", so no fault may cost it an attempt.
    let noops: Vec<(Uuid, String, i32, i64)> = sqlx::query_as(
        "SELECT t.id, t.status, t.attempt, count(a.task_id)
         FROM tasks t LEFT JOIN task_attempts a ON a.task_id = t.id
         WHERE t.kind = 'noop'
         GROUP BY t.id
         HAVING t.status <> 'succeeded' OR t.attempt <> 1 OR count(a.task_id) <> 1",
    )
    .fetch_all(store.pool())
    .await?;
    for (id, status, attempt, rows) in noops {
        violations.push(format!(
            "2e: noop task {id} is {status} at attempt {attempt} with {rows} attempt rows, not \
             succeeded at its first with one"
        ));
    }
    Ok(())
}

/// Invariant 3, the log against the attempts, both ways: an attempt that succeeded, or failed
/// with an exit code, ran its command (a start and an end line); every line belongs to an
/// attempt the database has.
async fn log_matches_attempts(
    store: &Store,
    runs: &BTreeMap<(Uuid, i32), Run>,
    violations: &mut Vec<String>,
) -> Result<()> {
    let attempts: Vec<(Uuid, i32, Option<String>, Option<i32>)> = sqlx::query_as(
        "SELECT a.task_id, a.attempt, a.outcome, a.exit_code FROM task_attempts a
         JOIN tasks t ON t.id = a.task_id WHERE t.kind = 'shell'",
    )
    .fetch_all(store.pool())
    .await?;
    let known: BTreeSet<(Uuid, i32)> = attempts.iter().map(|(t, a, _, _)| (*t, *a)).collect();
    let mut unlogged = Vec::new();
    for (task, attempt, outcome, exit_code) in &attempts {
        let ran = outcome.as_deref() == Some("succeeded") || exit_code.is_some();
        let logged = runs
            .get(&(*task, *attempt))
            .is_some_and(|run| !run.starts.is_empty() && run.ended);
        if ran && !logged {
            unlogged.push(format!("{task}/{attempt} ({outcome:?})"));
        }
    }
    if !unlogged.is_empty() {
        violations.push(format!(
            "3a: {} attempts ended with their command's exit but the log has no start and end \
             for them, e.g. {:?}",
            unlogged.len(),
            &unlogged[..unlogged.len().min(5)]
        ));
    }
    let strays: Vec<String> = runs
        .keys()
        .filter(|key| !known.contains(key))
        .map(|(task, attempt)| format!("{task}/{attempt}"))
        .collect();
    if !strays.is_empty() {
        violations.push(format!(
            "3b: {} commands ran for attempts the database does not have, e.g. {:?}",
            strays.len(),
            &strays[..strays.len().min(5)]
        ));
    }
    Ok(())
}

/// Invariant 3, losses: an attempt was lost only when its worker was killed, terminated, frozen
/// or cut off from PostgreSQL while it held the attempt (a worker that lost its start in an
/// error, `never ran`, also when the database was down or slow then). Returns how many losses
/// there were.
///
/// "While it held the attempt" is the attempt's own span, from its start (the database's now()
/// when the worker claimed it) to its loss (when recovery or the worker recorded it), widened
/// by [`CLOCK_SLACK_MS`] only: the ledger's times and the database's are one host's clock. A
/// fault before the start cannot have lost an attempt not yet held, and one after the loss was
/// recorded did not cause it. For a worker's own release (`never ran`, `interrupted`), a
/// database fault's [`DATABASE_AFTERMATH_S`] counts as the fault; for an attempt it let go unrun
/// (`never ran`), that of its own partition or refusal too.
async fn losses_explained(evidence: &Evidence<'_>, violations: &mut Vec<String>) -> Result<usize> {
    type Lost = (
        Uuid,
        i32,
        Option<i32>,
        jiff_sqlx::Timestamp,
        Option<jiff_sqlx::Timestamp>,
        Option<String>,
    );
    let lost: Vec<Lost> = sqlx::query_as(
        "SELECT a.task_id, a.attempt, w.pid, a.started_at, a.finished_at, a.error
             FROM task_attempts a LEFT JOIN workers w ON w.id = a.worker_id
             WHERE a.outcome = 'lost'",
    )
    .fetch_all(evidence.store.pool())
    .await?;
    let windows = evidence.faults.database_windows();
    let mut unexplained = Vec::new();
    for (task, attempt, pid, started, finished, error) in &lost {
        let (from, to) = (
            started.to_jiff(),
            finished
                .as_ref()
                .map_or(evidence.paused_at, |f| f.to_jiff()),
        );
        let by_process = pid.is_some_and(|pid| {
            evidence
                .faults
                .process_faulted(pid as u32, from, to, CLOCK_SLACK_MS)
        });
        // A database that is away or slow explains a start the worker never heard answered,
        // and a worker that let its attempts go when it could not renew its lease in time
        // (interrupted); never a worker declared dead ("stopped responding").
        let never_ran = error.as_deref().is_some_and(|e| e.contains("never ran"));
        let own_doing = never_ran
            || error
                .as_deref()
                .is_some_and(|e| e.starts_with("interrupted"));
        // A database back from a fault is still slow for a while, every process reconnecting
        // to it at once: its aftermath explains a worker's own release too. That of the
        // worker's own partition or refusal explains an attempt let go unrun: a start asked for
        // under a lease that ran out during it commits once the worker is back. Never one
        // interrupted after it: the worker is not slowed then, and would have run it.
        let slack = SignedDuration::from_millis(CLOCK_SLACK_MS);
        let aftermath = SignedDuration::from_secs(DATABASE_AFTERMATH_S);
        let own_windows = match pid {
            Some(pid) if never_ran => evidence.faults.own_database_windows(*pid as u32),
            _ => Vec::new(),
        };
        let by_database = windows
            .iter()
            .chain(&own_windows)
            .any(|(f, t)| *f - slack <= to && from <= *t + aftermath);
        if !(by_process || (own_doing && by_database)) {
            // What the ledger says about that process, to tell a checker's miss from a bug.
            let seen: Vec<String> = evidence
                .faults
                .records
                .iter()
                .filter(|r| r.pid.is_some() && r.pid == pid.map(|p| p as u32))
                .map(|r| format!("{} {}..{}", r.kind, r.from, r.to))
                .collect();
            unexplained.push(format!(
                "{task}/{attempt} (worker pid {pid:?}, ran {from}..{to}: {error:?}; faults on \
                 that pid: {seen:?})"
            ));
        }
    }
    if !unexplained.is_empty() {
        violations.push(format!(
            "3c: {} attempts were lost though no fault hit their worker, e.g. {:?}",
            unexplained.len(),
            &unexplained[..unexplained.len().min(5)]
        ));
    }
    Ok(lost.len())
}

/// Invariant 3: an attempt recorded as never run (its worker let it go before starting its
/// command) has no start in the log: otherwise a command ran that recovery took for not run.
async fn never_ran_means_never_started(
    store: &Store,
    runs: &BTreeMap<(Uuid, i32), Run>,
    violations: &mut Vec<String>,
) -> Result<()> {
    let never_ran: Vec<(Uuid, i32)> = sqlx::query_as(
        "SELECT task_id, attempt FROM task_attempts
         WHERE outcome = 'lost' AND error LIKE '%never ran%'",
    )
    .fetch_all(store.pool())
    .await?;
    let started: Vec<String> = never_ran
        .iter()
        .filter(|key| runs.get(key).is_some_and(|run| !run.starts.is_empty()))
        .map(|(task, attempt)| format!("{task}/{attempt}"))
        .collect();
    if !started.is_empty() {
        violations.push(format!(
            "3i: {} attempts recorded as never run logged a start, e.g. {:?}",
            started.len(),
            &started[..started.len().min(5)]
        ));
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
                "3d: attempt {attempt} of task {task} ({}) started {} times",
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
                "3e: task {task} ({}) ran attempts {} and {} at the same time",
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
        violations.push(format!("3f: {open} attempts were never closed"));
    }
    let doubles: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT task_id, count(*) FROM task_attempts WHERE outcome = 'succeeded'
         GROUP BY task_id HAVING count(*) > 1",
    )
    .fetch_all(store.pool())
    .await?;
    for (task, n) in doubles {
        violations.push(format!("3g: task {task} has {n} succeeded attempts"));
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
            "3h: task {task} ran again after attempt {attempt} ended {outcome:?}"
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
                    "4a: {job}: task {id} started at {started} while task {before} was live \
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
            violations.push(format!("4b: {job}: two commands ran at once"));
        }
    }
    Ok(())
}

/// Invariant 5: the diamond, fed for the whole run. For each whole minute of the feed's window,
/// each downstream job has one task, and it succeeded; the join started after both its upstream
/// tasks had ended.
async fn diamond_fed_all_run(evidence: &Evidence<'_>, violations: &mut Vec<String>) -> Result<()> {
    let store = evidence.store;
    let window: Option<(jiff_sqlx::Timestamp, jiff_sqlx::Timestamp)> = sqlx::query_as(
        "SELECT t.start_time, t.end_time FROM triggers t JOIN jobs j ON j.id = t.job_id
         WHERE j.name = $1 AND t.end_time IS NOT NULL",
    )
    .bind(FEED)
    .fetch_optional(store.pool())
    .await?;
    let Some((start, end)) = window else {
        violations.push(format!(
            "5c: the feed job {FEED} has no trigger with an end"
        ));
        return Ok(());
    };
    let (start, end) = (start.to_jiff(), end.to_jiff().min(evidence.paused_at));
    let mut minute = start;
    let mut minutes = 0;
    while minute + SignedDuration::from_secs(60) <= end {
        minutes += 1;
        let fed_until: Option<jiff_sqlx::Timestamp> = sqlx::query_scalar(
            "SELECT max(t.finished_at) FROM tasks t JOIN jobs j ON j.id = t.job_id
             WHERE j.name = $1 AND t.data_time >= $2 AND t.data_time < $2 + interval '1 minute'",
        )
        .bind(FEED)
        .bind(jiff_sqlx::Timestamp::from(minute))
        .fetch_one(store.pool())
        .await?;
        let mut ended = Vec::new();
        for job in DIAMOND {
            let tasks: Vec<(
                String,
                Option<jiff_sqlx::Timestamp>,
                Option<jiff_sqlx::Timestamp>,
            )> = sqlx::query_as(
                "SELECT t.status, (SELECT min(a.started_at) FROM task_attempts a
                                       WHERE a.task_id = t.id), t.finished_at
                     FROM tasks t JOIN jobs j ON j.id = t.job_id
                     WHERE j.name = $1 AND t.data_time = $2",
            )
            .bind(job)
            .bind(jiff_sqlx::Timestamp::from(minute))
            .fetch_all(store.pool())
            .await?;
            let statuses: Vec<&str> = tasks.iter().map(|t| t.0.as_str()).collect();
            if statuses != ["succeeded"] {
                violations.push(format!(
                    "5a: {job} for {minute}: tasks {statuses:?}, not one that succeeded"
                ));
            }
            // A fold reads its minute's feeds: it may start only once the last of them ended.
            if let (Some(fed_until), Some((_, Some(started), _))) = (&fed_until, tasks.first())
                && job != DIAMOND[2]
                && started.to_jiff() < fed_until.to_jiff()
            {
                violations.push(format!(
                    "5d: {job} for {minute} started at {}, before the last feed of its minute \
                     ended ({})",
                    started.to_jiff(),
                    fed_until.to_jiff()
                ));
            }
            ended.push(tasks.first().map(|t| {
                (
                    t.1.as_ref().map(|s| s.to_jiff()),
                    t.2.as_ref().map(|f| f.to_jiff()),
                )
            }));
        }
        // DIAMOND's last job joins the first two.
        if let [
            Some((_, Some(b_end))),
            Some((_, Some(c_end))),
            Some((Some(d_start), _)),
        ] = ended[..]
            && d_start < b_end.max(c_end)
        {
            violations.push(format!(
                "5b: {} for {minute} started at {d_start}, before its upstreams ended \
                 ({b_end}, {c_end})",
                DIAMOND[2]
            ));
        }
        minute += SignedDuration::from_secs(60);
    }
    if minutes == 0 {
        violations.push(format!(
            "5c: the feed covered no whole minute ({start}..{end})"
        ));
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
        match what {
            "start" => run.starts.push(at),
            "end" => run.ended = true,
            _ => {}
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_that_began_while_another_held_a_fire_extends_its_deadline() {
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let bound = SignedDuration::from_secs(15);
        // Held by a slow database (10..60), then a stop that began before 60 + 15 (70..100).
        let windows = [(at(10), at(60)), (at(70), at(100)), (at(500), at(600))];
        assert_eq!(fire_deadline(at(20), bound, &windows), at(115));
        // No fault near it: its own bound.
        assert_eq!(fire_deadline(at(300), bound, &windows), at(315));
        // A fault that began after its deadline does not excuse it.
        assert_eq!(fire_deadline(at(470), bound, &windows), at(485));
    }
}
