//! Job dependencies (`job_dependencies`) and what a downstream job is waiting for.
//!
//! A dependency says a job's task for data time D needs its upstream job's task(s) to have
//! succeeded: with window `same`, the upstream's task for D; with window `period`, every upstream
//! run whose data time falls within D's period (the downstream job's `data_time_period`), as the
//! upstream's triggers schedule them: a daily job after all 24 hourly runs of that day.
//! [`evaluate`] answers "is (job, D) ready, failed, or waiting, and on what"; the dependency
//! service acts on the answer through `task_lifecycle`, and `chime task show` prints it.

use std::collections::BTreeMap;

use jiff::{RoundMode, Timestamp, ToSpan, Unit, Zoned, ZonedRound, tz::TimeZone};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Context, Store, StoreError};
pub use crate::model::UnmetDependency;
use crate::schedule::{Calendar, CalendarSpec, Schedule, ScheduleSpec};

/// Which upstream runs a downstream data time needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// The upstream's task for the same data time.
    #[default]
    Same,
    /// Every upstream run within the downstream data time's period.
    Period,
}

/// What a downstream task does when an upstream it needs has failed (or was killed) for good.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnUpstreamFailure {
    /// Fail too, with reason `upstream_failed` (and so on downstream).
    #[default]
    Fail,
    /// Keep waiting until the upstream is re-run and succeeds.
    Wait,
}

/// The OS users the tasks of a job run as (`None`: the worker's default user), with those of the
/// jobs its success runs: downstream jobs without triggers of their own (their tasks are made
/// when their upstreams succeed), and with `with_downstream` every job downstream of it. What a
/// caller must be allowed before it runs, schedules or backfills the job, as
/// `(group.name, execute_user)`; empty if there is no such job (what the caller then does says
/// so in its own words).
pub async fn execute_users<'e>(
    db: impl sqlx::PgExecutor<'e>,
    group: &str,
    name: &str,
    with_downstream: bool,
) -> Result<Vec<(String, Option<String>)>, StoreError> {
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        r#"
        WITH RECURSIVE reach (id) AS (
            SELECT id FROM jobs WHERE group_name = $1 AND name = $2
            UNION
            SELECT d.job_id FROM reach JOIN job_dependencies d ON d.depends_on_job_id = reach.id
            WHERE $3 OR NOT EXISTS (SELECT 1 FROM triggers t WHERE t.job_id = d.job_id)
        )
        SELECT j.group_name || '.' || j.name, j.execute_user FROM reach JOIN jobs j USING (id)
        "#,
    )
    .bind(group)
    .bind(name)
    .bind(with_downstream)
    .fetch_all(db)
    .await
    .context("reading the execute users of a job and its downstream")?;
    Ok(rows)
}

/// A dependency as the API takes it: the job in the path depends on `upstream`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDependency {
    /// The upstream job's name.
    #[serde(deserialize_with = "crate::model::names::deserialize_nfc")]
    pub upstream: String,
    /// Its group (default `default`).
    #[serde(default, deserialize_with = "crate::model::names::deserialize_nfc_opt")]
    pub upstream_group: Option<String>,
    /// Default `same`.
    #[serde(default)]
    pub window: Option<Window>,
    /// Default `fail`.
    #[serde(default)]
    pub on_upstream_failure: Option<OnUpstreamFailure>,
}

/// A stored dependency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DependencyView {
    /// The downstream job, `group.name`.
    pub job: String,
    /// The upstream job, `group.name`.
    pub upstream: String,
    /// The window.
    pub window: Window,
    /// The failure policy.
    pub on_upstream_failure: OnUpstreamFailure,
}

/// A job's dependencies both ways.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobDependencies {
    /// What it depends on.
    pub upstreams: Vec<DependencyView>,
    /// What depends on it.
    pub downstreams: Vec<DependencyView>,
}

/// What a downstream (job, data time) may do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every upstream run it needs has succeeded.
    Ready,
    /// An upstream it needs failed for good and the policy is `fail`.
    Failed {
        /// That upstream, `group.name`.
        upstream: String,
    },
    /// Still waiting on these.
    Waiting(Vec<UnmetDependency>),
}

/// A data-time period: data times of a job that has one are truncated to it (in the job's zone,
/// see [`ZonedPeriod`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// A minute.
    Minute,
    /// An hour.
    Hour,
    /// A day.
    Day,
    /// A week from Monday.
    Week,
    /// A calendar month.
    Month,
}

impl Period {
    /// Parses `minute`, `hour`, `day`, `week` or `month`.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "minute" => Self::Minute,
            "hour" => Self::Hour,
            "day" => Self::Day,
            "week" => Self::Week,
            "month" => Self::Month,
            _ => return None,
        })
    }

    /// The start of the period holding `t` in UTC (as PostgreSQL's `date_trunc(period, t, 'UTC')`).
    pub fn truncate(self, t: Timestamp) -> Timestamp {
        self.truncate_in(t, &TimeZone::UTC)
    }

    /// The start of the period holding `t` in `zone` (local midnight for a day).
    pub fn truncate_in(self, t: Timestamp, zone: &TimeZone) -> Timestamp {
        let z = t.to_zoned(zone.clone());
        let truncated = match self {
            Self::Minute => z.round(
                ZonedRound::new()
                    .smallest(Unit::Minute)
                    .mode(RoundMode::Trunc),
            ),
            Self::Hour => z.round(
                ZonedRound::new()
                    .smallest(Unit::Hour)
                    .mode(RoundMode::Trunc),
            ),
            Self::Day => z.start_of_day(),
            Self::Week => {
                let back = i64::from(z.weekday().to_monday_zero_offset());
                z.start_of_day().and_then(|d| d.checked_sub(back.days()))
            }
            Self::Month => z.first_of_month().and_then(|d| d.start_of_day()),
        };
        truncated.map_or(t, |z: Zoned| z.timestamp())
    }

    /// The end (exclusive) of the period starting at `start`, in UTC.
    pub fn end(self, start: Timestamp) -> Timestamp {
        self.end_in(start, &TimeZone::UTC)
    }

    /// The end (exclusive) of the period starting at `start`, in `zone` (a local day may be 23
    /// or 25 hours long).
    pub fn end_in(self, start: Timestamp, zone: &TimeZone) -> Timestamp {
        let z = start.to_zoned(zone.clone());
        let end = match self {
            Self::Minute => z.checked_add(1.minute()),
            Self::Hour => z.checked_add(1.hour()),
            Self::Day => z.checked_add(1.day()),
            Self::Week => z.checked_add(7.days()),
            Self::Month => z.checked_add(1.month()),
        };
        end.map_or(start, |z| z.timestamp())
    }
}

/// A job's data-time period in its zone, as the store gives it: `day`, or `day@Asia/Shanghai`
/// (SQL `period_in_zone(data_time_period, data_time_zone)`).
#[derive(Debug, Clone, PartialEq)]
pub struct ZonedPeriod {
    /// The period.
    pub period: Period,
    /// The zone its boundaries are in.
    pub zone: TimeZone,
}

impl ZonedPeriod {
    /// Parses `day` (UTC) or `day@Zone`; None for an unknown period or zone.
    pub fn parse(text: &str) -> Option<Self> {
        let (period, zone) = match text.split_once('@') {
            Some((period, zone)) => (period, TimeZone::get(zone).ok()?),
            None => (text, TimeZone::UTC),
        };
        Some(Self {
            period: Period::parse(period)?,
            zone,
        })
    }

    /// The start of the period holding `t`, in the zone.
    pub fn truncate(&self, t: Timestamp) -> Timestamp {
        self.period.truncate_in(t, &self.zone)
    }

    /// The end (exclusive) of the period starting at `start`, in the zone.
    pub fn end(&self, start: Timestamp) -> Timestamp {
        self.period.end_in(start, &self.zone)
    }
}

/// The data time of a run of a job with `period` (`day` or `day@Zone`) scheduled at `t`.
pub fn data_time_of(period: Option<&str>, t: Timestamp) -> Timestamp {
    period
        .and_then(ZonedPeriod::parse)
        .map_or(t, |p| p.truncate(t))
}

/// Serialises dependency changes, so two concurrent additions cannot make a cycle together.
const DEPENDENCY_LOCK: i64 = 0x6368_696d_6564_6570; // "chimedep"

async fn job_id(conn: &mut sqlx::PgConnection, group: &str, name: &str) -> Result<i64, StoreError> {
    let id: Option<i64> =
        sqlx::query_scalar("SELECT id FROM jobs WHERE group_name = $1 AND name = $2")
            .bind(group)
            .bind(name)
            .fetch_optional(conn)
            .await
            .context("looking up the job")?;
    id.ok_or_else(|| StoreError::NotFound(format!("job {group}.{name}")))
}

/// Makes job `group.name` depend on `dependency.upstream` (or changes the window and policy of an
/// existing dependency). A dependency that would close a cycle is refused, naming it.
pub async fn add(
    store: &Store,
    group: &str,
    name: &str,
    dependency: NewDependency,
) -> Result<DependencyView, StoreError> {
    let upstream_group = dependency.upstream_group.as_deref().unwrap_or("default");
    // Checked here, a NUL or a name no job can have is a 400 naming the field, not a database
    // error.
    for (field, value) in [
        ("upstream", dependency.upstream.as_str()),
        ("upstream_group", upstream_group),
    ] {
        crate::model::check_name(field, value).map_err(StoreError::Invalid)?;
    }
    let mut tx = store.begin().await?;
    let view = add_in(&mut tx, group, name, dependency).await?;
    tx.commit().await.context("committing the dependency")?;
    Ok(view)
}

/// [`add`] inside the caller's transaction.
pub(crate) async fn add_in(
    tx: &mut sqlx::PgConnection,
    group: &str,
    name: &str,
    dependency: NewDependency,
) -> Result<DependencyView, StoreError> {
    let upstream_group = dependency.upstream_group.as_deref().unwrap_or("default");
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(DEPENDENCY_LOCK)
        .execute(&mut *tx)
        .await
        .context("taking the dependency lock")?;
    let job = job_id(&mut *tx, group, name).await?;
    let upstream = job_id(&mut *tx, upstream_group, &dependency.upstream).await?;
    if job == upstream {
        return Err(StoreError::Invalid(format!(
            "job {group}.{name} cannot depend on itself"
        )));
    }
    // Does the upstream already (transitively) depend on the job? Then the new edge closes a
    // cycle: job → upstream → … → job.
    let path: Option<Vec<String>> = sqlx::query_scalar(
        r#"
        WITH RECURSIVE reach (id, path) AS (
            SELECT $1::bigint, ARRAY[$1::bigint]
            UNION ALL
            SELECT d.depends_on_job_id, reach.path || d.depends_on_job_id
            FROM reach JOIN job_dependencies d ON d.job_id = reach.id
            WHERE NOT d.depends_on_job_id = ANY (reach.path)
        )
        SELECT array_agg(j.group_name || '.' || j.name ORDER BY p.n)
        FROM (SELECT path FROM reach WHERE id = $2 LIMIT 1) r,
             unnest(r.path) WITH ORDINALITY AS p(id, n)
             JOIN jobs j ON j.id = p.id
        "#,
    )
    .bind(upstream)
    .bind(job)
    .fetch_one(&mut *tx)
    .await
    .context("checking for a cycle")?;
    if let Some(path) = path.filter(|p| !p.is_empty()) {
        return Err(StoreError::Invalid(format!(
            "cycle: {group}.{name} → {} (a job cannot depend on itself through others)",
            path.join(" → ")
        )));
    }
    let window = dependency.window.unwrap_or_default();
    let policy = dependency.on_upstream_failure.unwrap_or_default();
    sqlx::query(
        r#"INSERT INTO job_dependencies (job_id, depends_on_job_id, "window", on_upstream_failure)
           VALUES ($1, $2, $3, $4)
           ON CONFLICT (job_id, depends_on_job_id)
           DO UPDATE SET "window" = excluded."window",
                         on_upstream_failure = excluded.on_upstream_failure"#,
    )
    .bind(job)
    .bind(upstream)
    .bind(window_name(window))
    .bind(policy_name(policy))
    .execute(&mut *tx)
    .await
    .context("adding the dependency")?;
    if let Some(why) = never_meeting(&mut *tx, job).await? {
        return Err(StoreError::Invalid(why));
    }
    Ok(DependencyView {
        job: format!("{group}.{name}"),
        upstream: format!("{upstream_group}.{}", dependency.upstream),
        window,
        on_upstream_failure: policy,
    })
}

/// Removes job `group.name`'s dependency on `upstream_group.upstream`.
pub async fn remove(
    db: impl sqlx::PgExecutor<'_>,
    group: &str,
    name: &str,
    upstream_group: &str,
    upstream: &str,
) -> Result<(), StoreError> {
    let removed = sqlx::query(
        "DELETE FROM job_dependencies d USING jobs j, jobs u
         WHERE d.job_id = j.id AND d.depends_on_job_id = u.id
           AND j.group_name = $1 AND j.name = $2 AND u.group_name = $3 AND u.name = $4",
    )
    .bind(group)
    .bind(name)
    .bind(upstream_group)
    .bind(upstream)
    .execute(db)
    .await
    .context("removing the dependency")?;
    if removed.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!(
            "dependency of {group}.{name} on {upstream_group}.{upstream}"
        )));
    }
    Ok(())
}

/// A job's dependencies, both ways.
pub async fn of_job(store: &Store, group: &str, name: &str) -> Result<JobDependencies, StoreError> {
    let rows: Vec<(String, String, String, String, bool)> = sqlx::query_as(
        r#"
        SELECT j.group_name || '.' || j.name, u.group_name || '.' || u.name, d."window",
               d.on_upstream_failure, (j.group_name = $1 AND j.name = $2)
        FROM job_dependencies d JOIN jobs j ON j.id = d.job_id
             JOIN jobs u ON u.id = d.depends_on_job_id
        WHERE (j.group_name = $1 AND j.name = $2) OR (u.group_name = $1 AND u.name = $2)
        ORDER BY 1, 2
        "#,
    )
    .bind(group)
    .bind(name)
    .fetch_all(store.pool())
    .await
    .context("listing dependencies")?;
    let mut result = JobDependencies {
        upstreams: Vec::new(),
        downstreams: Vec::new(),
    };
    for (job, upstream, window, policy, is_downstream) in rows {
        let view = DependencyView {
            job,
            upstream,
            window: if window == "period" {
                Window::Period
            } else {
                Window::Same
            },
            on_upstream_failure: if policy == "wait" {
                OnUpstreamFailure::Wait
            } else {
                OnUpstreamFailure::Fail
            },
        };
        if is_downstream {
            result.upstreams.push(view);
        } else {
            result.downstreams.push(view);
        }
    }
    Ok(result)
}

/// A downstream job of an upstream job.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Downstream {
    /// The downstream job.
    pub job_id: i64,
    /// Its window on the upstream.
    pub window: String,
    /// Its data-time period.
    pub data_time_period: Option<String>,
}

impl Downstream {
    /// The downstream data time an upstream run for `upstream_data_time` counts towards.
    pub fn data_time_for(&self, upstream_data_time: Timestamp) -> Timestamp {
        match self.window.as_str() {
            "period" => data_time_of(self.data_time_period.as_deref(), upstream_data_time),
            _ => upstream_data_time,
        }
    }
}

/// The jobs that depend on `upstream`.
pub async fn downstreams(store: &Store, upstream: i64) -> Result<Vec<Downstream>, StoreError> {
    sqlx::query_as(
        r#"SELECT d.job_id, d."window",
                  period_in_zone(j.data_time_period, j.data_time_zone) AS data_time_period
           FROM job_dependencies d JOIN jobs j ON j.id = d.job_id
           WHERE d.depends_on_job_id = $1"#,
    )
    .bind(upstream)
    .fetch_all(store.pool())
    .await
    .context("listing downstream jobs")
}

#[derive(sqlx::FromRow)]
struct Upstream {
    id: i64,
    label: String,
    window: String,
    on_upstream_failure: String,
    data_time_period: Option<String>,
    job_period: Option<String>,
}

#[derive(sqlx::FromRow)]
struct UpstreamTrigger {
    schedule: Json<ScheduleSpec>,
    start_time: jiff_sqlx::Timestamp,
    calendar: Option<Json<CalendarSpec>>,
}

/// The most upstream runs one period window may expect.
const MAX_EXPECTED_RUNS: usize = 10_000;

/// Whether job `job_id`'s run for `data_time` may go ahead: every dependency's upstream runs for
/// it, looked up now.
pub async fn evaluate(
    store: &Store,
    job_id: i64,
    data_time: Timestamp,
) -> Result<Verdict, StoreError> {
    let upstreams: Vec<Upstream> = sqlx::query_as(
        r#"SELECT u.id, u.group_name || '.' || u.name AS label, d."window",
                  d.on_upstream_failure,
                  period_in_zone(u.data_time_period, u.data_time_zone) AS data_time_period,
                  period_in_zone(j.data_time_period, j.data_time_zone) AS job_period
           FROM job_dependencies d JOIN jobs u ON u.id = d.depends_on_job_id
                JOIN jobs j ON j.id = d.job_id
           WHERE d.job_id = $1
           ORDER BY u.id"#,
    )
    .bind(job_id)
    .fetch_all(store.pool())
    .await
    .context("reading the job's dependencies")?;
    let mut unmet = Vec::new();
    for upstream in upstreams {
        let period = upstream.job_period.as_deref().and_then(ZonedPeriod::parse);
        let (from, until, expected) = match (upstream.window.as_str(), period) {
            ("period", Some(period)) => {
                let from = period.truncate(data_time);
                let until = period.end(from);
                let expected = expected_runs(store, &upstream, from, until).await?;
                (from, until, expected)
            }
            _ => (
                data_time,
                // PostgreSQL keeps microseconds: the next one ends a one-instant window.
                data_time
                    .checked_add(jiff::SignedDuration::from_micros(1))
                    .unwrap_or(data_time),
                Some(vec![data_time]),
            ),
        };
        // The latest task of each upstream data time in the window.
        let runs: Vec<(jiff_sqlx::Timestamp, String, Uuid)> = sqlx::query_as(
            "SELECT DISTINCT ON (data_time) data_time, status, id FROM tasks
             WHERE job_id = $1 AND data_time >= $2 AND data_time < $3
             ORDER BY data_time, id DESC",
        )
        .bind(upstream.id)
        .bind(jiff_sqlx::Timestamp::from(from))
        .bind(jiff_sqlx::Timestamp::from(until))
        .fetch_all(store.pool())
        .await
        .context("reading upstream runs")?;
        let runs: BTreeMap<Timestamp, (String, Uuid)> = runs
            .into_iter()
            .map(|(t, s, id)| (t.to_jiff(), (s, id)))
            .collect();
        let needed: Vec<Timestamp> = match expected {
            Some(expected) => expected,
            // An upstream without triggers: whatever runs exist, and at least one.
            None if runs.is_empty() => {
                unmet.push(UnmetDependency {
                    upstream: upstream.label.clone(),
                    data_time: None,
                    state: "missing".into(),
                    task: None,
                });
                continue;
            }
            None => runs.keys().copied().collect(),
        };
        for t in needed {
            let run = runs.get(&t);
            let task = run.map(|(_, id)| *id);
            match run.map(|(status, _)| status.as_str()) {
                Some("succeeded") => {}
                Some(status @ ("failed" | "killed")) => {
                    if upstream.on_upstream_failure == "fail" {
                        return Ok(Verdict::Failed {
                            upstream: upstream.label,
                        });
                    }
                    unmet.push(UnmetDependency {
                        upstream: upstream.label.clone(),
                        data_time: Some(t),
                        state: format!("{status}; waiting for a rerun"),
                        task,
                    });
                }
                other => unmet.push(UnmetDependency {
                    upstream: upstream.label.clone(),
                    data_time: Some(t),
                    state: other.unwrap_or("missing").to_string(),
                    task,
                }),
            }
        }
    }
    Ok(if unmet.is_empty() {
        Verdict::Ready
    } else {
        Verdict::Waiting(unmet)
    })
}

/// The data times of the runs the upstream's triggers schedule in `[from, until)`; None when it
/// has no triggers (its runs are made on demand) or they schedule none there.
async fn expected_runs(
    store: &Store,
    upstream: &Upstream,
    from: Timestamp,
    until: Timestamp,
) -> Result<Option<Vec<Timestamp>>, StoreError> {
    let triggers: Vec<UpstreamTrigger> = sqlx::query_as(
        "SELECT t.schedule, t.start_time, c.definition AS calendar
         FROM triggers t LEFT JOIN calendars c ON c.name = t.calendar_name
         WHERE t.job_id = $1",
    )
    .bind(upstream.id)
    .fetch_all(store.pool())
    .await
    .context("reading the upstream's triggers")?;
    if triggers.is_empty() {
        return Ok(None);
    }
    let last = until
        .checked_sub(jiff::SignedDuration::from_nanos(1))
        .unwrap_or(until);
    let mut times = std::collections::BTreeSet::new();
    for trigger in triggers {
        // A window wholly before the trigger was created (a backfill's) counts the runs its
        // schedule would have made then; otherwise only runs from its start count.
        let created = trigger.start_time.to_jiff();
        let start = if until <= created { from } else { created };
        let Ok(schedule) = Schedule::compile(&trigger.schedule.0, start) else {
            continue;
        };
        let calendar = trigger.calendar.and_then(|c| Calendar::compile(&c.0).ok());
        let fires = schedule.fire_times_between(calendar.as_ref(), from, last, MAX_EXPECTED_RUNS);
        if fires.len() >= MAX_EXPECTED_RUNS {
            // Too many to list: fall back to the runs that exist.
            return Ok(None);
        }
        for fire in fires {
            times.insert(data_time_of(upstream.data_time_period.as_deref(), fire));
        }
    }
    // No run scheduled in the window: fall back to the runs that exist (at least one).
    Ok((!times.is_empty()).then(|| times.into_iter().collect()))
}

/// Why a dependency of job `job_id` (either way) would never be met, if one would not: a
/// downstream job with a trigger of its own makes its runs for its fire times, truncated to its
/// data-time period, and waits (window `same`) for the upstream's run of exactly that data time.
/// Where the upstream's runs come from its own triggers too, either fires on an interval
/// (`--every`, calendar- or daily-interval triggers, started at any millisecond) and the two do
/// not share a period, those data times never meet, and the downstream job would wait for ever
/// without a word. (An upstream without triggers is run for the data times its caller gives.) Checked in the transaction that adds the
/// dependency or the trigger, which is refused with what to set.
pub(crate) async fn never_meeting(
    conn: &mut sqlx::PgConnection,
    job_id: i64,
) -> Result<Option<String>, StoreError> {
    type Found = (
        String,
        String,
        String,
        Option<String>,
        String,
        Option<String>,
        String,
    );
    let found: Option<Found> = sqlx::query_as(
        r#"SELECT d.group_name || '.' || d.name, u.group_name || '.' || u.name,
                  (SELECT t.group_name || '.' || t.name FROM triggers t
                   WHERE t.job_id IN (d.id, u.id) AND t.schedule->>'kind' <> 'cron'
                   ORDER BY t.id LIMIT 1),
                  d.data_time_period, d.data_time_zone, u.data_time_period, u.data_time_zone
           FROM job_dependencies e
           JOIN jobs d ON d.id = e.job_id JOIN jobs u ON u.id = e.depends_on_job_id
           WHERE (e.job_id = $1 OR e.depends_on_job_id = $1)
             AND EXISTS (SELECT 1 FROM triggers t WHERE t.job_id = d.id)
             AND EXISTS (SELECT 1 FROM triggers t WHERE t.job_id = u.id)
             AND NOT (e."window" = 'period' AND d.data_time_period IS NOT NULL)
             AND (d.data_time_period IS NULL OR u.data_time_period IS NULL
                  OR period_in_zone(d.data_time_period, d.data_time_zone)
                     <> period_in_zone(u.data_time_period, u.data_time_zone))
             AND EXISTS (SELECT 1 FROM triggers t
                         WHERE t.job_id IN (d.id, u.id) AND t.schedule->>'kind' <> 'cron')
           ORDER BY e.job_id, e.depends_on_job_id LIMIT 1"#,
    )
    .bind(job_id)
    .fetch_optional(&mut *conn)
    .await
    .context("checking that the dependency's data times meet")?;
    let period = |period: Option<String>, zone: String| match period {
        Some(period) => format!("per {period} in {zone}"),
        None => "no data-time period".to_string(),
    };
    Ok(found.map(|(down, up, trigger, dp, dz, up_p, up_z)| {
        let (down_has, up_has) = (period(dp, dz), period(up_p, up_z));
        format!(
            "{down} would wait for ever for {up}: {down} fires on its own, each run waits for \
             {up}'s run of the same data time, and trigger {trigger} fires on an interval, so \
             their data times ({down}: {down_has}; {up}: {up_has}) never meet. Give both jobs \
             the same data-time period in the same zone (chime job update NAME \
             --data-time-period minute|hour|day [--data-time-zone ZONE]), or depend with \
             --window period on a downstream job that has one, or remove {down}'s trigger so \
             that {up}'s runs make {down}'s"
        )
    }))
}

fn window_name(window: Window) -> &'static str {
    match window {
        Window::Same => "same",
        Window::Period => "period",
    }
}

fn policy_name(policy: OnUpstreamFailure) -> &'static str {
    match policy {
        OnUpstreamFailure::Fail => "fail",
        OnUpstreamFailure::Wait => "wait",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn periods_truncate_in_utc() {
        let at = t("2026-11-18T13:45:30Z"); // a Wednesday
        assert_eq!(Period::Minute.truncate(at), t("2026-11-18T13:45:00Z"));
        assert_eq!(Period::Hour.truncate(at), t("2026-11-18T13:00:00Z"));
        assert_eq!(Period::Day.truncate(at), t("2026-11-18T00:00:00Z"));
        assert_eq!(Period::Week.truncate(at), t("2026-11-16T00:00:00Z"));
        assert_eq!(Period::Month.truncate(at), t("2026-11-01T00:00:00Z"));
        // In a zone: a day starts at local midnight, and a DST day is 23 hours long.
        let shanghai = ZonedPeriod::parse("day@Asia/Shanghai").expect("a zoned period");
        assert_eq!(shanghai.truncate(at), t("2026-11-17T16:00:00Z"));
        assert_eq!(
            shanghai.end(t("2026-11-17T16:00:00Z")),
            t("2026-11-18T16:00:00Z")
        );
        let new_york = ZonedPeriod::parse("day@America/New_York").expect("a zoned period");
        let spring = new_york.truncate(t("2026-03-08T12:00:00Z"));
        assert_eq!(spring, t("2026-03-08T05:00:00Z"));
        assert_eq!(new_york.end(spring), t("2026-03-09T04:00:00Z"));
        assert_eq!(
            data_time_of(Some("day@Asia/Shanghai"), at),
            t("2026-11-17T16:00:00Z")
        );
        assert!(ZonedPeriod::parse("day@Mars/Olympus").is_none());
        assert_eq!(
            Period::Month.end(t("2026-12-01T00:00:00Z")),
            t("2027-01-01T00:00:00Z")
        );
        assert_eq!(
            Period::Week.end(t("2026-11-16T00:00:00Z")),
            t("2026-11-23T00:00:00Z")
        );
    }
}
