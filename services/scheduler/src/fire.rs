//! Where triggers are fired.
//!
//! One round, one transaction:
//!
//! ```text
//!   acquire: waiting triggers due within the lookahead, group not paused,
//!            ORDER BY next_fire_time, priority DESC LIMIT batch FOR UPDATE SKIP LOCKED
//!     │  (per trigger) blocked job → state blocked, fire held
//!     │                misfired    → the trigger's misfire policy
//!     │                each due fire → task + fired_triggers + outbox row released at the fire time
//!   advance next_fire_time / prev_fire_time / times_triggered (or complete), commit
//! ```
//!
//! Any number of instances run this loop: `SKIP LOCKED` gives each a disjoint batch and the
//! unique (trigger, scheduled time) makes a fire happen once even if two ever overlapped. Time is
//! the database's `now()`, never this node's clock. Messages are published by the outbox relay at
//! their fire time, not before.

use std::collections::HashSet;
use std::time::Duration;

use chime_core::bus::Topology;
use chime_core::model::{MESSAGE_VERSION, TaskMessage};
use chime_core::schedule::misfire::{self, MisfirePolicy};
use chime_core::schedule::{Calendar, CalendarSpec, Schedule, ScheduleSpec};
use chime_core::store::task_lifecycle::{TriggerFire, record_trigger_fires};
use chime_core::store::{Context, Store, StoreError, dependencies};
use jiff::{SignedDuration, Timestamp};
use sqlx::FromRow;
use sqlx::types::Json;
use tracing::warn;
use uuid::Uuid;

/// The most fires one trigger makes in one round (a `fire_all` catch-up goes on next round).
const MAX_FIRES_PER_TRIGGER: usize = 1000;

/// How the firing loop behaves.
#[derive(Debug, Clone)]
pub struct FiringSettings {
    /// Triggers due this far ahead are fired now (their messages wait for their time).
    pub lookahead: Duration,
    /// Triggers per round.
    pub batch: i64,
    /// A fire later than this is misfired.
    pub misfire_threshold: Duration,
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Round {
    /// Triggers acquired.
    pub acquired: usize,
    /// Tasks created.
    pub fired: u64,
    /// Triggers whose misfire policy was applied.
    pub misfired: usize,
}

#[derive(FromRow)]
struct DueTrigger {
    id: i64,
    job_id: i64,
    schedule: Json<ScheduleSpec>,
    start_time: jiff_sqlx::Timestamp,
    next_fire_time: jiff_sqlx::Timestamp,
    prev_fire_time: Option<jiff_sqlx::Timestamp>,
    /// When it was resumed from a pause, until it fires again.
    resumed_at: Option<jiff_sqlx::Timestamp>,
    times_triggered: i64,
    misfire_policy: String,
    priority: i32,
    trigger_data: Json<serde_json::Value>,
    calendar: Option<Json<CalendarSpec>>,
    kind: String,
    spec: Json<serde_json::Value>,
    worker_group: String,
    concurrent: bool,
    job_busy: bool,
    job_data: Json<serde_json::Value>,
    timeout_ms: Option<i64>,
    execute_user: Option<String>,
    data_time_period: Option<String>,
}

/// A trigger's state after the round.
struct Advance {
    id: i64,
    next_fire_time: Option<Timestamp>,
    prev_fire_time: Option<Timestamp>,
    times_triggered: i64,
    state: &'static str,
    /// A simple trigger rescheduled by its misfire policy has a new start and repeat count.
    schedule: Option<ScheduleSpec>,
}

/// Fires what is due; one transaction.
pub async fn fire_due(
    store: &Store,
    topology: &Topology,
    instance_id: &str,
    settings: &FiringSettings,
) -> Result<Round, StoreError> {
    let mut tx = store
        .pool()
        .begin()
        .await
        .context("starting a firing transaction")?;
    let now: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut *tx)
        .await
        .context("reading the clock")?;
    let now = now.to_jiff();
    let due: Vec<DueTrigger> = sqlx::query_as(
        r#"
        SELECT t.id, t.job_id, t.schedule, t.start_time, t.next_fire_time, t.prev_fire_time,
               t.resumed_at,
               t.times_triggered, t.misfire_policy, t.priority, t.data AS trigger_data,
               c.definition AS calendar, j.kind, j.spec, j.worker_group, j.concurrent,
               (NOT j.concurrent AND EXISTS (
                   SELECT 1 FROM tasks x
                   WHERE x.job_id = j.id AND x.status IN ('ready', 'running', 'retrying')
               )) AS job_busy,
               j.data AS job_data, j.timeout_ms, j.execute_user,
               period_in_zone(j.data_time_period, j.data_time_zone) AS data_time_period
        FROM triggers t
        JOIN jobs j ON j.id = t.job_id
        LEFT JOIN calendars c ON c.name = t.calendar_name
        WHERE t.state = 'waiting'
          AND t.next_fire_time <= now() + make_interval(secs => $1)
          AND NOT EXISTS (SELECT 1 FROM paused_trigger_groups p WHERE p.group_name = t.group_name)
        ORDER BY t.next_fire_time, t.priority DESC
        LIMIT $2
        FOR UPDATE OF t SKIP LOCKED
        "#,
    )
    .bind(settings.lookahead.as_secs_f64())
    .bind(settings.batch)
    .fetch_all(&mut *tx)
    .await
    .context("acquiring due triggers")?;
    let mut due = due;
    let mut round = Round {
        acquired: due.len(),
        ..Round::default()
    };
    mark_busy_jobs(&mut tx, &mut due).await?;
    if due.is_empty() {
        tx.commit().await.context("committing")?;
        return Ok(round);
    }
    let horizon = now + SignedDuration::try_from(settings.lookahead).unwrap_or_default();
    let threshold = SignedDuration::try_from(settings.misfire_threshold).unwrap_or_default();
    let mut fires = Vec::new();
    let mut advances = Vec::with_capacity(due.len());
    let mut jobs_fired_alone = HashSet::new();
    for trigger in &due {
        match plan(
            trigger,
            now,
            horizon,
            threshold,
            &mut jobs_fired_alone,
            &mut fires,
        ) {
            Ok((advance, misfired)) => {
                round.misfired += usize::from(misfired);
                advances.push(advance);
            }
            Err(error) => {
                warn!(trigger = trigger.id, %error, "trigger cannot be evaluated; state error");
                advances.push(Advance {
                    id: trigger.id,
                    next_fire_time: Some(trigger.next_fire_time.to_jiff()),
                    prev_fire_time: trigger.prev_fire_time.map(|t| t.to_jiff()),
                    times_triggered: trigger.times_triggered,
                    state: "error",
                    schedule: None,
                });
            }
        }
    }
    round.fired = record_trigger_fires(&mut tx, topology, instance_id, &fires).await?;
    advance_triggers(&mut tx, &advances).await?;
    tx.commit().await.context("committing fires")?;
    if round.fired > 0 {
        // This process's relay publishes them (a fire due now must not wait for its poll).
        store.outbox_written();
    }
    Ok(round)
}

/// Non-concurrent jobs are decided under their job's row lock: the busy flag read with the due
/// triggers comes from a snapshot taken before another instance (holding other triggers of the
/// same job, which `SKIP LOCKED` hid from this one) committed its fire. Locking the jobs and
/// reading their live tasks in a statement after the lock sees every fire committed before, and
/// holds off every fire after, this round's commit. A job locked by someone else (another
/// instance's round, or a job being paused or deleted, which locks the job before its triggers)
/// is skipped, not waited for: its triggers are left for the next round, so no lock order can
/// deadlock.
async fn mark_busy_jobs(
    tx: &mut sqlx::PgConnection,
    due: &mut Vec<DueTrigger>,
) -> Result<(), StoreError> {
    let mut jobs: Vec<i64> = due
        .iter()
        .filter(|t| !t.concurrent)
        .map(|t| t.job_id)
        .collect();
    if jobs.is_empty() {
        return Ok(());
    }
    jobs.sort_unstable();
    jobs.dedup();
    let locked: HashSet<i64> = sqlx::query_scalar(
        "SELECT id FROM jobs WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED",
    )
    .bind(&jobs)
    .fetch_all(&mut *tx)
    .await
    .context("locking non-concurrent jobs")?
    .into_iter()
    .collect();
    due.retain(|t| t.concurrent || locked.contains(&t.job_id));
    let jobs: Vec<i64> = locked.into_iter().collect();
    let busy: HashSet<i64> = sqlx::query_scalar(
        "SELECT DISTINCT job_id FROM tasks
         WHERE job_id = ANY($1) AND status IN ('ready', 'running', 'retrying')",
    )
    .bind(&jobs)
    .fetch_all(&mut *tx)
    .await
    .context("reading the live tasks of non-concurrent jobs")?
    .into_iter()
    .collect();
    for trigger in due.iter_mut().filter(|t| !t.concurrent) {
        trigger.job_busy = busy.contains(&trigger.job_id);
    }
    Ok(())
}

/// `blocked → waiting` for triggers whose job has no live task any more. A worker ending a task
/// unblocks its job's triggers in the same statement, but a trigger blocked by a round that read
/// the job as busy just before that task ended is written `blocked` after the worker looked: this
/// pass, run every round, lets no trigger stay blocked beside a free job. Returns how many moved.
pub async fn unblock_free_triggers(store: &Store) -> Result<u64, StoreError> {
    let moved = sqlx::query(
        "UPDATE triggers t SET state = 'waiting', updated_at = now()
         WHERE t.state = 'blocked'
           AND NOT EXISTS (SELECT 1 FROM tasks x
                           WHERE x.job_id = t.job_id
                             AND x.status IN ('ready', 'running', 'retrying'))",
    )
    .execute(store.pool())
    .await
    .context("unblocking triggers of free jobs")?;
    Ok(moved.rows_affected())
}

/// Decides one trigger's fires this round and its state after them.
fn plan(
    trigger: &DueTrigger,
    now: Timestamp,
    horizon: Timestamp,
    threshold: SignedDuration,
    jobs_fired_alone: &mut HashSet<i64>,
    fires: &mut Vec<TriggerFire>,
) -> Result<(Advance, bool), String> {
    let mut spec = trigger.schedule.0.clone();
    let mut schedule =
        Schedule::compile(&spec, trigger.start_time.to_jiff()).map_err(|e| e.to_string())?;
    let calendar = trigger
        .calendar
        .as_ref()
        .map(|c| Calendar::compile(&c.0))
        .transpose()
        .map_err(|e| e.to_string())?;
    let policy: MisfirePolicy = trigger.misfire_policy.parse().map_err(|e| format!("{e}"))?;
    let mut next = Some(trigger.next_fire_time.to_jiff());
    let mut prev = trigger.prev_fire_time.map(|t| t.to_jiff());
    let mut times = trigger.times_triggered;
    let mut changed_schedule = None;

    // A job that runs one task at a time: hold the fire while a task of it is live.
    if !trigger.concurrent && (trigger.job_busy || jobs_fired_alone.contains(&trigger.job_id)) {
        return Ok((
            Advance {
                id: trigger.id,
                next_fire_time: next,
                prev_fire_time: prev,
                times_triggered: times,
                state: "blocked",
                schedule: None,
            },
            false,
        ));
    }

    // A time that passed while the trigger was paused was not missed by accident: it is a
    // misfire however short the pause.
    let missed_while_paused = |due: Timestamp| {
        trigger
            .resumed_at
            .as_ref()
            .is_some_and(|resumed| due < resumed.to_jiff())
    };
    let mut misfired = false;
    if let Some(due) = next
        && policy != MisfirePolicy::FireAll
        && (misfire::is_misfired(due, now, threshold) || missed_while_paused(due))
    {
        misfired = true;
        let outcome = misfire::apply(&schedule, policy, due, times, calendar.as_ref(), now);
        next = outcome.next_fire_time;
        times = outcome.times_triggered;
        if let Some(restarted) = outcome.restarted_schedule(&spec) {
            spec = restarted;
            schedule = Schedule::compile(&spec, outcome.start).map_err(|e| e.to_string())?;
            changed_schedule = Some(spec.clone());
        }
        metrics::counter!("chime_scheduler_misfires_total", "policy" => policy.as_str())
            .increment(1);
    }

    let mut fired_now = 0;
    while let Some(at) = next
        && at <= horizon
        && fired_now < MAX_FIRES_PER_TRIGGER
    {
        if !trigger.concurrent && fired_now == 1 {
            break;
        }
        fires.push(fire(trigger, at));
        fired_now += 1;
        times += 1;
        prev = Some(at);
        next = schedule.next_fire_time(at, times, calendar.as_ref());
    }
    if !trigger.concurrent && fired_now > 0 {
        jobs_fired_alone.insert(trigger.job_id);
    }
    Ok((
        Advance {
            id: trigger.id,
            next_fire_time: next,
            prev_fire_time: prev,
            times_triggered: times,
            state: if next.is_some() {
                "waiting"
            } else {
                "complete"
            },
            schedule: changed_schedule,
        },
        misfired,
    ))
}

/// The task one fire makes: the job's spec, the job's data overlaid with the trigger's, and the
/// scheduled time as its data time.
fn fire(trigger: &DueTrigger, at: Timestamp) -> TriggerFire {
    let mut data = trigger.job_data.0.clone();
    if let (Some(base), Some(extra)) = (data.as_object_mut(), trigger.trigger_data.0.as_object()) {
        for (key, value) in extra {
            base.insert(key.clone(), value.clone());
        }
    }
    TriggerFire {
        trigger_id: trigger.id,
        job_id: trigger.job_id,
        sched_time: at,
        priority: trigger.priority,
        message: TaskMessage {
            v: MESSAGE_VERSION,
            task_id: Uuid::now_v7(),
            attempt: 1,
            kind: trigger.kind.clone(),
            group: trigger.worker_group.clone(),
            spec: trigger.spec.0.clone(),
            data,
            // A job with a data-time period runs for the period its fire falls in.
            data_time: Some(dependencies::data_time_of(
                trigger.data_time_period.as_deref(),
                at,
            )),
            timeout_ms: trigger.timeout_ms,
            execute_user: trigger.execute_user.clone(),
        },
    }
}

async fn advance_triggers(
    tx: &mut sqlx::PgConnection,
    advances: &[Advance],
) -> Result<(), StoreError> {
    let ids: Vec<i64> = advances.iter().map(|a| a.id).collect();
    let next: Vec<Option<jiff_sqlx::Timestamp>> = advances
        .iter()
        .map(|a| a.next_fire_time.map(Into::into))
        .collect();
    let prev: Vec<Option<jiff_sqlx::Timestamp>> = advances
        .iter()
        .map(|a| a.prev_fire_time.map(Into::into))
        .collect();
    let times: Vec<i64> = advances.iter().map(|a| a.times_triggered).collect();
    let states: Vec<&str> = advances.iter().map(|a| a.state).collect();
    let schedules: Vec<Option<Json<&ScheduleSpec>>> = advances
        .iter()
        .map(|a| a.schedule.as_ref().map(Json))
        .collect();
    let starts: Vec<Option<jiff_sqlx::Timestamp>> = advances
        .iter()
        .map(|a| {
            a.schedule
                .as_ref()
                .and_then(ScheduleSpec::start_time)
                .map(Into::into)
        })
        .collect();
    sqlx::query(
        r#"
        UPDATE triggers t
        SET next_fire_time = u.next_fire_time, prev_fire_time = u.prev_fire_time,
            times_triggered = u.times_triggered, state = u.state,
            schedule = coalesce(u.schedule, t.schedule),
            start_time = coalesce(u.start_time, t.start_time), updated_at = now(),
            resumed_at = CASE WHEN u.state = 'blocked' THEN t.resumed_at END
        FROM UNNEST($1::bigint[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $5::text[],
                    $6::jsonb[], $7::timestamptz[])
            AS u(id, next_fire_time, prev_fire_time, times_triggered, state, schedule, start_time)
        WHERE t.id = u.id
        "#,
    )
    .bind(&ids)
    .bind(&next)
    .bind(&prev)
    .bind(&times)
    .bind(&states)
    .bind(&schedules)
    .bind(&starts)
    .execute(tx)
    .await
    .context("advancing triggers")?;
    Ok(())
}

/// How long until there is work: the earliest waiting trigger entering the lookahead window, or
/// the earliest retry coming due (None: neither exists).
pub async fn until_next_work(
    store: &Store,
    lookahead: Duration,
) -> Result<Option<Duration>, StoreError> {
    let (trigger, retry): (Option<f64>, Option<f64>) = sqlx::query_as(
        "SELECT EXTRACT(EPOCH FROM ((SELECT min(next_fire_time) FROM triggers
                                     WHERE state = 'waiting') - now()))::float8,
                EXTRACT(EPOCH FROM ((SELECT min(next_attempt_at) FROM tasks
                                     WHERE status = 'retrying') - now()))::float8",
    )
    .fetch_one(store.pool())
    .await
    .context("finding the next work")?;
    let trigger = trigger.map(|s| (s - lookahead.as_secs_f64()).max(0.0));
    let retry = retry.map(|s| s.max(0.0));
    Ok(match (trigger, retry) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
    .map(Duration::from_secs_f64))
}
