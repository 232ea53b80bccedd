//! `--self-test`: shows that every check can fail. After a run's own check, each case below
//! breaks the run's records (or what the run saw) the way a bug would, checks that the one
//! sub-check meant to catch it reports it (`3e`, not any check of invariant 3), and puts the
//! records back. There is a case for every sub-check `invariants.rs` lists.

use anyhow::{Context, Result};
use uuid::Uuid;

use crate::invariants::{self, Evidence};
use crate::workload::{CHAOS_GROUP, DIAMOND, FEED, ONE_AT_A_TIME};

/// One way to break one sub-check.
struct Case {
    /// The sub-check that must report it, as its violations begin (`3e:`).
    invariant: &'static str,
    what: &'static str,
    /// Statements that break the records (run in order), and those that mend them.
    break_sql: Vec<String>,
    mend_sql: Vec<String>,
    /// Lines to append to the side-effect log (or, with `drop_lines`, lines to leave out).
    log: LogChange,
    /// What the run saw, changed for this case alone.
    seen: SeenChange,
}

impl Case {
    /// A case made by statements alone.
    fn sql(
        invariant: &'static str,
        what: &'static str,
        break_sql: String,
        mend_sql: String,
    ) -> Self {
        Self {
            invariant,
            what,
            break_sql: vec![break_sql],
            mend_sql: vec![mend_sql],
            log: LogChange::None,
            seen: SeenChange::None,
        }
    }

    /// A case made by the side-effect log alone.
    fn log(invariant: &'static str, what: &'static str, log: LogChange) -> Self {
        Self {
            invariant,
            what,
            break_sql: Vec::new(),
            mend_sql: Vec::new(),
            log,
            seen: SeenChange::None,
        }
    }

    /// A case made by what the run saw alone.
    fn seen(invariant: &'static str, what: &'static str, seen: SeenChange) -> Self {
        Self {
            invariant,
            what,
            break_sql: Vec::new(),
            mend_sql: Vec::new(),
            log: LogChange::None,
            seen,
        }
    }
}

enum LogChange {
    None,
    Append(String),
    DropAttempt(Uuid, i32),
}

/// What the run saw, as a bug in chime (not in the records) would change it.
enum SeenChange {
    None,
    /// A submission accepted that no task holds.
    ExtraSubmission,
    /// One poison message fewer sent than the workload needs.
    PoisonShort,
    /// A dead letter more than the poison messages.
    ExtraDeadLetter,
}

/// How many cases there are: one for every sub-check, two for 3c (no fault at all, and one
/// outside the attempt's span).
const EXPECTED: usize = 32;

/// Runs every case; returns the lines to print and whether every case was reported.
pub async fn run(evidence: &Evidence<'_>) -> Result<(Vec<String>, bool)> {
    let store = evidence.store;
    let before: Vec<String> = invariants::check(evidence).await?.1;
    let mut lines = Vec::new();
    let mut all = true;
    for case in cases(evidence).await? {
        let Some(case) = case else {
            continue;
        };
        let original = std::fs::read_to_string(evidence.log)?;
        for sql in &case.break_sql {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .execute(store.pool())
                .await
                .with_context(|| format!("breaking: {sql}"))?;
        }
        match &case.log {
            LogChange::None => {}
            LogChange::Append(line) => std::fs::write(evidence.log, format!("{original}{line}\n"))?,
            LogChange::DropAttempt(task, attempt) => {
                let kept: Vec<&str> = original
                    .lines()
                    .filter(|l| !l.contains(&format!(" {task} {attempt} ")))
                    .collect();
                std::fs::write(evidence.log, kept.join("\n") + "\n")?;
            }
        }
        let extra_submission = [evidence.submitted, &[Uuid::now_v7()]].concat();
        let stranger = br#"{"v":1,"kind":"shell","spec":{"command":["true"]}}"#.to_vec();
        let extra_dead_letter = [evidence.dead_letters, &[stranger]].concat();
        let (_, sent) = evidence.poison;
        let seen = match case.seen {
            SeenChange::None => Evidence { ..*evidence },
            SeenChange::ExtraSubmission => Evidence {
                submitted: &extra_submission,
                ..*evidence
            },
            SeenChange::PoisonShort => Evidence {
                poison: (crate::workload::POISON - 1, sent),
                ..*evidence
            },
            SeenChange::ExtraDeadLetter => Evidence {
                dead_letters: &extra_dead_letter,
                ..*evidence
            },
        };
        let after = invariants::check(&seen).await?.1;
        let reported = after
            .iter()
            .any(|v| v.starts_with(case.invariant) && !before.contains(v));
        all &= reported;
        lines.push(format!(
            "self-test: invariant {} {}: {}",
            case.invariant.trim_end_matches(':'),
            case.what,
            if reported { "reported" } else { "NOT REPORTED" }
        ));
        std::fs::write(evidence.log, original)?;
        for sql in &case.mend_sql {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .execute(store.pool())
                .await
                .with_context(|| format!("mending: {sql}"))?;
        }
    }
    let expected = EXPECTED;
    if lines.len() < expected {
        all = false;
        lines.push(format!(
            "self-test: only {} of {expected} cases could be set up from this run's records",
            lines.len()
        ));
    }
    Ok((lines, all))
}

async fn one<T>(evidence: &Evidence<'_>, sql: String) -> Result<Option<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_optional(evidence.store.pool())
        .await?)
}

/// The cases this run's records allow (None where they do not), one for every sub-check.
async fn cases(evidence: &Evidence<'_>) -> Result<Vec<Option<Case>>> {
    let mut cases = Vec::new();
    let nc = format!("'{}', '{}'", ONE_AT_A_TIME[0], ONE_AT_A_TIME[1]);
    // 1: a fire of a checked trigger, well before the pause.
    let fire: Option<(i64,)> = one(
        evidence,
        format!(
            "SELECT f.id FROM fired_triggers f JOIN triggers t ON t.id = f.trigger_id
             JOIN jobs j ON j.id = t.job_id
             WHERE t.group_name = '{CHAOS_GROUP}' AND j.name NOT IN ({nc})
             ORDER BY f.sched_time LIMIT 1"
        ),
    )
    .await?;
    cases.push(fire.map(|(id,)| {
        Case::sql(
            "1a:",
            "(a fire made an hour late)",
            format!(
                "UPDATE fired_triggers SET fired_time = fired_time + interval '1 hour' WHERE id = {id}"
            ),
            format!(
                "UPDATE fired_triggers SET fired_time = fired_time - interval '1 hour' WHERE id = {id}"
            ),
        )
    }));
    // The calendar the engine applies, changed under the arithmetic, which knows the workload's.
    let quiet: Option<(String,)> = one(
        evidence,
        "SELECT definition::text FROM calendars WHERE name = 'quiet'".into(),
    )
    .await?;
    cases.push(quiet.map(|(definition,)| {
        Case::sql(
            "1b:",
            "(the engine and plain arithmetic disagree)",
            "UPDATE calendars SET definition = jsonb_set(definition, '{cron}', '\"40-59 * * ? * *\"')
             WHERE name = 'quiet'"
                .into(),
            format!(
                "UPDATE calendars SET definition = '{}'::jsonb WHERE name = 'quiet'",
                definition.replace('\'', "''")
            ),
        )
    }));
    cases.push(fire.map(|(id,)| {
        Case::sql(
            "1c:",
            "(a fire at a time its schedule does not have)",
            format!(
                "INSERT INTO fired_triggers (trigger_id, job_id, instance_id, sched_time, fired_time)
                 SELECT trigger_id, job_id, 'self-test', sched_time + interval '1 ms', fired_time
                 FROM fired_triggers WHERE id = {id}"
            ),
            "DELETE FROM fired_triggers WHERE instance_id = 'self-test'".into(),
        )
    }));
    // Moved past the checked span: only its time is missing.
    cases.push(fire.map(|(id,)| {
        Case::sql(
            "1d:",
            "(a fire never made)",
            format!(
                "UPDATE fired_triggers SET sched_time = sched_time + interval '10 years' WHERE id = {id}"
            ),
            format!(
                "UPDATE fired_triggers SET sched_time = sched_time - interval '10 years' WHERE id = {id}"
            ),
        )
    }));
    // A fire's task taken away (the fire now points at no task).
    let fire_task: Option<(i64, Uuid)> = one(
        evidence,
        "SELECT id, task_id FROM fired_triggers WHERE state = 'fired' AND task_id IS NOT NULL
         ORDER BY sched_time LIMIT 1"
            .into(),
    )
    .await?;
    cases.push(fire_task.map(|(id, task)| {
        Case::sql(
            "1e:",
            "(a fire whose task does not exist)",
            format!(
                "UPDATE fired_triggers SET task_id = '{}' WHERE id = {id}",
                Uuid::now_v7()
            ),
            format!("UPDATE fired_triggers SET task_id = '{task}' WHERE id = {id}"),
        )
    }));
    // A checked fire's message published a day late, then its task started a day late.
    let checked: Option<(Uuid,)> = one(
        evidence,
        format!(
            "SELECT f.task_id FROM fired_triggers f JOIN triggers t ON t.id = f.trigger_id
             JOIN jobs j ON j.id = t.job_id
             WHERE t.group_name = '{CHAOS_GROUP}' AND j.name NOT IN ({nc}) AND f.state = 'fired'
               AND EXISTS (SELECT 1 FROM task_attempts a WHERE a.task_id = f.task_id)
               -- Published rows are kept an hour: the newest fire's is still there.
               AND EXISTS (SELECT 1 FROM outbox o WHERE o.body->>'task_id' = f.task_id::text
                           AND o.headers ? 'x-chime-scheduled-time')
             ORDER BY f.sched_time DESC LIMIT 1"
        ),
    )
    .await?;
    let message = |task: &Uuid, by: &str| {
        format!(
            "UPDATE outbox SET published_at = published_at {by} interval '1 day'
             WHERE body->>'task_id' = '{task}' AND body->>'attempt' = '1'"
        )
    };
    cases.push(checked.map(|(task,)| {
        Case::sql(
            "1f:",
            "(a fire's message published a day late)",
            message(&task, "+"),
            message(&task, "-"),
        )
    }));
    let started = |task: &Uuid, by: &str| {
        format!(
            "UPDATE task_attempts SET started_at = started_at {by} interval '1 day'
             WHERE task_id = '{task}'"
        )
    };
    cases.push(checked.map(|(task,)| {
        Case::sql(
            "1g:",
            "(a fire's task started a day after its message)",
            started(&task, "+"),
            started(&task, "-"),
        )
    }));
    // 2: a succeeded task, left ready; failed for no reason; killed unasked.
    let task: Option<(Uuid, Option<String>)> = one(
        evidence,
        "SELECT id, reason FROM tasks WHERE status = 'succeeded' AND kill_requested_at IS NULL
         ORDER BY id LIMIT 1"
            .into(),
    )
    .await?;
    let reason = |r: &Option<String>| r.as_ref().map_or("NULL".into(), |r| format!("'{r}'"));
    cases.push(task.as_ref().map(|(id, _)| {
        Case::sql(
            "2a:",
            "(a task that never ended)",
            format!("UPDATE tasks SET status = 'ready' WHERE id = '{id}'"),
            format!("UPDATE tasks SET status = 'succeeded' WHERE id = '{id}'"),
        )
    }));
    cases.push(Some(Case::seen(
        "2b:",
        "(an accepted submission that is no task)",
        SeenChange::ExtraSubmission,
    )));
    cases.push(task.as_ref().map(|(id, was)| {
        Case::sql(
            "2c:",
            "(a failure nothing explains)",
            format!("UPDATE tasks SET status = 'failed', reason = 'failed' WHERE id = '{id}'"),
            format!(
                "UPDATE tasks SET status = 'succeeded', reason = {} WHERE id = '{id}'",
                reason(was)
            ),
        )
    }));
    cases.push(task.as_ref().map(|(id, was)| {
        Case::sql(
            "2d:",
            "(a kill nobody asked for)",
            format!("UPDATE tasks SET status = 'killed', reason = 'killed' WHERE id = '{id}'"),
            format!(
                "UPDATE tasks SET status = 'succeeded', reason = {} WHERE id = '{id}'",
                reason(was)
            ),
        )
    }));
    let noop: Option<(Uuid,)> = one(
        evidence,
        "SELECT id FROM tasks WHERE kind = 'noop' AND status = 'succeeded' ORDER BY id LIMIT 1"
            .into(),
    )
    .await?;
    let recovering: Option<(Uuid, Option<String>)> = one(
        evidence,
        "SELECT id, reason FROM tasks WHERE requests_recovery AND status = 'succeeded'
         AND kill_requested_at IS NULL ORDER BY id LIMIT 1"
            .into(),
    )
    .await?;
    cases.push(recovering.map(|(id, was)| {
        Case::sql(
            "2f:",
            "(a task that requests recovery failed for a lost attempt)",
            format!("UPDATE tasks SET status = 'failed', reason = 'lost' WHERE id = '{id}'"),
            format!(
                "UPDATE tasks SET status = 'succeeded', reason = {} WHERE id = '{id}'",
                reason(&was)
            ),
        )
    }));
    cases.push(noop.map(|(id,)| {
        Case::sql(
            "2e:",
            "(a noop task at a second attempt)",
            format!("UPDATE tasks SET attempt = 2 WHERE id = '{id}'"),
            format!("UPDATE tasks SET attempt = 1 WHERE id = '{id}'"),
        )
    }));
    // 3: the log and the attempts, on a shell task's last attempt, which succeeded.
    let ran: Option<(Uuid, i32, String, Option<Uuid>)> = one(
        evidence,
        "SELECT a.task_id, a.attempt, coalesce(j.name, 'adhoc'), a.worker_id FROM task_attempts a
         JOIN tasks t ON t.id = a.task_id LEFT JOIN jobs j ON j.id = t.job_id
         WHERE a.outcome = 'succeeded' AND t.kind = 'shell' AND a.attempt = t.attempt
         ORDER BY a.started_at LIMIT 1"
            .into(),
    )
    .await?;
    let now = jiff::Timestamp::now().as_nanosecond();
    let second = 1_000_000_000_i128;
    cases.push(ran.as_ref().map(|(task, attempt, _, _)| {
        Case::log(
            "3a:",
            "(an attempt that ran without its log lines)",
            LogChange::DropAttempt(*task, *attempt),
        )
    }));
    cases.push(Some(Case::log(
        "3b:",
        "(a command logged for no attempt)",
        LogChange::Append(format!("start {} 1 stray {now}", Uuid::now_v7())),
    )));
    cases.push(ran.as_ref().map(|(task, attempt, _, worker)| {
        let ghost = Uuid::now_v7();
        let worker = worker.map_or("NULL".into(), |w| format!("'{w}'"));
        Case {
            invariant: "3c:",
            what: "(an attempt lost while its worker was fine)",
            break_sql: vec![
                format!(
                    "INSERT INTO workers (id, name, host, pid, groups, kinds, concurrency, status,
                                          version)
                     VALUES ('{ghost}', 'ghost', 'nowhere', 2147483647, '{{default}}',
                             '{{shell}}', 1, 'offline', 'self-test')"
                ),
                format!(
                    "UPDATE task_attempts SET outcome = 'lost', worker_id = '{ghost}'
                     WHERE task_id = '{task}' AND attempt = {attempt}"
                ),
            ],
            mend_sql: vec![
                format!(
                    "UPDATE task_attempts SET outcome = 'succeeded', worker_id = {worker}
                     WHERE task_id = '{task}' AND attempt = {attempt}"
                ),
                format!("DELETE FROM workers WHERE id = '{ghost}'"),
            ],
            log: LogChange::None,
            seen: SeenChange::None,
        }
    }));
    // The same attempt lost, by a worker whose process a fault hit 5 s after the loss: a fault
    // outside the attempt's span explains nothing.
    let times: Option<(String, String)> = match &ran {
        Some((task, attempt, _, _)) => {
            one(
                evidence,
                format!(
                    "SELECT started_at::text, finished_at::text FROM task_attempts
                     WHERE task_id = '{task}' AND attempt = {attempt}"
                ),
            )
            .await?
        }
        None => None,
    };
    let struck = evidence.faults.records.iter().find(|r| {
        r.pid.is_some()
            && evidence
                .faults
                .process_faulted(r.pid.unwrap_or_default(), r.from, r.from, 0)
    });
    cases.push(ran.as_ref().zip(times).zip(struck).map(
        |(((task, attempt, _, worker), (started, finished)), fault)| {
            let ghost = Uuid::now_v7();
            let worker = worker.map_or("NULL".into(), |w| format!("'{w}'"));
            let pid = fault.pid.unwrap_or_default();
            let at = fault.from;
            Case {
                invariant: "3c:",
                what: "(an attempt lost 5 s before a fault of its worker)",
                break_sql: vec![
                    format!(
                        "INSERT INTO workers (id, name, host, pid, groups, kinds, concurrency,
                                              status, version)
                         VALUES ('{ghost}', 'ghost', 'nowhere', {pid}, '{{default}}',
                                 '{{shell}}', 1, 'offline', 'self-test')"
                    ),
                    format!(
                        "UPDATE task_attempts SET outcome = 'lost', worker_id = '{ghost}',
                                started_at = '{at}'::timestamptz - interval '8 s',
                                finished_at = '{at}'::timestamptz - interval '5 s'
                         WHERE task_id = '{task}' AND attempt = {attempt}"
                    ),
                ],
                mend_sql: vec![
                    format!(
                        "UPDATE task_attempts SET outcome = 'succeeded', worker_id = {worker},
                                started_at = '{started}', finished_at = '{finished}'
                         WHERE task_id = '{task}' AND attempt = {attempt}"
                    ),
                    format!("DELETE FROM workers WHERE id = '{ghost}'"),
                ],
                log: LogChange::None,
                seen: SeenChange::None,
            }
        },
    ));
    cases.push(ran.as_ref().map(|(task, attempt, job, _)| {
        Case::log(
            "3d:",
            "(an attempt started twice)",
            LogChange::Append(format!("start {task} {attempt} {job} {now}")),
        )
    }));
    // Two attempts of one task, the second started while the first still ran.
    cases.push(ran.as_ref().map(|(task, _, job, _)| {
        Case::log(
            "3e:",
            "(two attempts of a task at once)",
            LogChange::Append(format!(
                "start {task} 98 {job} {now}\nend {task} 98 {job} {}\nstart {task} 99 {job} {}",
                now + 10 * second,
                now + second
            )),
        )
    }));
    cases.push(ran.as_ref().map(|(task, attempt, _, _)| {
        Case::sql(
            "3f:",
            "(an attempt never closed)",
            format!(
                "UPDATE task_attempts SET outcome = NULL WHERE task_id = '{task}' AND attempt = {attempt}"
            ),
            format!(
                "UPDATE task_attempts SET outcome = 'succeeded'
                 WHERE task_id = '{task}' AND attempt = {attempt}"
            ),
        )
    }));
    cases.push(ran.as_ref().map(|(task, attempt, _, _)| {
        Case::sql(
            "3g:",
            "(two succeeded attempts of a task)",
            format!(
                "INSERT INTO task_attempts (task_id, attempt, outcome)
                 VALUES ('{task}', {}, 'succeeded')",
                attempt + 100
            ),
            format!(
                "DELETE FROM task_attempts WHERE task_id = '{task}' AND attempt = {}",
                attempt + 100
            ),
        )
    }));
    // Its task at a next attempt after one that succeeded.
    cases.push(ran.as_ref().map(|(task, _, _, _)| {
        Case::sql(
            "3h:",
            "(a task run again after an attempt that did not allow it)",
            format!("UPDATE tasks SET attempt = attempt + 1 WHERE id = '{task}'"),
            format!("UPDATE tasks SET attempt = attempt - 1 WHERE id = '{task}'"),
        )
    }));
    // Its succeeded attempt, which logged its start, recorded as never run.
    cases.push(ran.as_ref().map(|(task, attempt, _, _)| {
        Case::sql(
            "3i:",
            "(an attempt recorded as never run that logged a start)",
            format!(
                "UPDATE task_attempts SET outcome = 'lost', error = 'its worker never ran it (self-test)'
                 WHERE task_id = '{task}' AND attempt = {attempt}"
            ),
            format!(
                "UPDATE task_attempts SET outcome = 'succeeded', error = NULL
                 WHERE task_id = '{task}' AND attempt = {attempt}"
            ),
        )
    }));
    // 4: the second task of a non-concurrent job started before the first ended.
    let pair: Option<(Uuid, i32, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT b.task_id, b.attempt,
                (extract(epoch FROM b.started_at - a.started_at) * 1000)::bigint
         FROM task_attempts a JOIN tasks ta ON ta.id = a.task_id
         JOIN task_attempts b ON b.started_at > a.started_at
         JOIN tasks tb ON tb.id = b.task_id AND tb.job_id = ta.job_id AND tb.id <> ta.id
         JOIN jobs j ON j.id = ta.job_id
         WHERE j.name IN ({nc}) ORDER BY b.started_at LIMIT 1"
    )))
    .fetch_optional(evidence.store.pool())
    .await?;
    cases.push(pair.map(|(task, attempt, gap_ms)| {
        let back = gap_ms + 1;
        Case::sql(
            "4a:",
            "(two tasks of a non-concurrent job at once)",
            format!(
                "UPDATE task_attempts SET started_at = started_at - interval '{back} ms'
                 WHERE task_id = '{task}' AND attempt = {attempt}"
            ),
            format!(
                "UPDATE task_attempts SET started_at = started_at + interval '{back} ms'
                 WHERE task_id = '{task}' AND attempt = {attempt}"
            ),
        )
    }));
    let (first, second_task) = (Uuid::now_v7(), Uuid::now_v7());
    let job = ONE_AT_A_TIME[0];
    cases.push(Some(Case::log(
        "4b:",
        "(two commands of a non-concurrent job at once)",
        LogChange::Append(format!(
            "start {first} 1 {job} {now}\nend {first} 1 {job} {}\nstart {second_task} 1 {job} {}",
            now + 10 * second,
            now + second
        )),
    )));
    // 5: a task of the diamond failed; the join ran before its upstreams; no whole minute.
    let fold: Option<(Uuid, Option<String>)> = one(
        evidence,
        format!(
            "SELECT t.id, t.reason FROM tasks t JOIN jobs j ON j.id = t.job_id
             WHERE j.name = '{}' AND t.status = 'succeeded' ORDER BY t.data_time LIMIT 1",
            DIAMOND[0]
        ),
    )
    .await?;
    cases.push(fold.map(|(id, was)| {
        Case::sql(
            "5a:",
            "(a diamond task that failed)",
            format!("UPDATE tasks SET status = 'failed', reason = 'lost' WHERE id = '{id}'"),
            format!(
                "UPDATE tasks SET status = 'succeeded', reason = {} WHERE id = '{id}'",
                reason(&was)
            ),
        )
    }));
    let join: Option<(Uuid,)> = one(
        evidence,
        format!(
            "SELECT t.id FROM tasks t JOIN jobs j ON j.id = t.job_id
             WHERE j.name = '{}' AND t.status = 'succeeded' ORDER BY t.data_time LIMIT 1",
            DIAMOND[2]
        ),
    )
    .await?;
    cases.push(join.map(|(id,)| {
        Case::sql(
            "5b:",
            "(the join started before its upstreams ended)",
            format!(
                "UPDATE task_attempts SET started_at = started_at - interval '1 hour'
                 WHERE task_id = '{id}'"
            ),
            format!(
                "UPDATE task_attempts SET started_at = started_at + interval '1 hour'
                 WHERE task_id = '{id}'"
            ),
        )
    }));
    let feed: Option<(i64, String)> = one(
        evidence,
        format!(
            "SELECT t.id, t.end_time::text FROM triggers t JOIN jobs j ON j.id = t.job_id
             WHERE j.name = '{FEED}' AND t.end_time IS NOT NULL LIMIT 1"
        ),
    )
    .await?;
    cases.push(feed.map(|(id, end)| {
        Case::sql(
            "5c:",
            "(the feed covered no whole minute)",
            format!("UPDATE triggers SET end_time = start_time + interval '30 s' WHERE id = {id}"),
            format!("UPDATE triggers SET end_time = '{end}'::timestamptz WHERE id = {id}"),
        )
    }));
    // A feed of the first fold's minute (the feed starts on a whole minute: inside the checked
    // span) made to end an hour later.
    let fed: Option<(Uuid,)> = one(
        evidence,
        format!(
            "SELECT f.id FROM tasks f JOIN jobs fj ON fj.id = f.job_id
             WHERE fj.name = '{FEED}' AND f.finished_at IS NOT NULL
               AND date_trunc('minute', f.data_time) = (
                   SELECT t.data_time FROM tasks t JOIN jobs j ON j.id = t.job_id
                   WHERE j.name = '{}' AND t.status = 'succeeded'
                   ORDER BY t.data_time LIMIT 1)
             LIMIT 1",
            DIAMOND[0]
        ),
    )
    .await?;
    cases.push(fed.map(|(id,)| {
        Case::sql(
            "5d:",
            "(a fold started before the last feed of its minute ended)",
            format!(
                "UPDATE tasks SET finished_at = finished_at + interval '1 hour' WHERE id = '{id}'"
            ),
            format!(
                "UPDATE tasks SET finished_at = finished_at - interval '1 hour' WHERE id = '{id}'"
            ),
        )
    }));
    // 6: an outbox row never published (the services are stopped by now); too few poison
    // messages; a dead letter nobody sent.
    cases.push(Some(Case::sql(
        "6a:",
        "(an outbox row never published)",
        "INSERT INTO outbox (exchange, routing_key, body)
         VALUES ('self-test', 'self-test', '{}'::jsonb)"
            .into(),
        "DELETE FROM outbox WHERE exchange = 'self-test'".into(),
    )));
    cases.push(Some(Case::seen(
        "6b:",
        "(a poison message the run could not send)",
        SeenChange::PoisonShort,
    )));
    cases.push(Some(Case::seen(
        "6c:",
        "(a dead letter other than the poison messages)",
        SeenChange::ExtraDeadLetter,
    )));
    Ok(cases)
}
