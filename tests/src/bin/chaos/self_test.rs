//! `--self-test`: shows that every invariant can fail. After a run's own check, each case below
//! breaks the run's records the way a bug would (a fire never made, a fire made late, a task left
//! running, a failure nobody explains, a command logged for no attempt, an attempt started twice,
//! an attempt that ran without its log lines, a loss while its worker was fine, two tasks of a
//! non-concurrent job at once, a diamond task that failed, an unpublished outbox row), checks
//! that the invariant reports it, and puts the records back.

use anyhow::{Context, Result};
use uuid::Uuid;

use crate::invariants::{self, Evidence};
use crate::workload::{CHAOS_GROUP, DIAMOND, ONE_AT_A_TIME};

/// One way to break one invariant.
struct Case {
    /// The invariant that must report it.
    invariant: &'static str,
    what: &'static str,
    /// Statements that break the records (run in order), and those that mend them.
    break_sql: Vec<String>,
    mend_sql: Vec<String>,
    /// Lines to append to the side-effect log (or, with `drop_lines`, lines to leave out).
    log: LogChange,
}

enum LogChange {
    None,
    Append(String),
    DropAttempt(Uuid, i32),
}

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
        let after = invariants::check(evidence).await?.1;
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
    let expected = 12;
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

/// The cases this run's records allow (None where they do not).
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
    // Moved a year back: its time is missing, and a time its schedule lacks is there.
    cases.push(fire.map(|(id,)| Case {
        invariant: "1:",
        what: "(a fire never made)",
        break_sql: vec![format!(
            "UPDATE fired_triggers SET sched_time = sched_time - interval '1 year' WHERE id = {id}"
        )],
        mend_sql: vec![format!(
            "UPDATE fired_triggers SET sched_time = sched_time + interval '1 year' WHERE id = {id}"
        )],
        log: LogChange::None,
    }));
    cases.push(fire.map(|(id,)| Case {
        invariant: "1:",
        what: "(a fire made 60 s late)",
        break_sql: vec![format!(
            "UPDATE fired_triggers SET fired_time = fired_time + interval '60 s' WHERE id = {id}"
        )],
        mend_sql: vec![format!(
            "UPDATE fired_triggers SET fired_time = fired_time - interval '60 s' WHERE id = {id}"
        )],
        log: LogChange::None,
    }));
    // 2: a succeeded task, left ready; and failed for no reason.
    let task: Option<(Uuid, Option<String>)> = one(
        evidence,
        "SELECT id, reason FROM tasks WHERE status = 'succeeded' ORDER BY id LIMIT 1".into(),
    )
    .await?;
    let reason = |r: &Option<String>| r.as_ref().map_or("NULL".into(), |r| format!("'{r}'"));
    cases.push(task.as_ref().map(|(id, _)| Case {
        invariant: "2:",
        what: "(a task that never ended)",
        break_sql: vec![format!(
            "UPDATE tasks SET status = 'ready' WHERE id = '{id}'"
        )],
        mend_sql: vec![format!(
            "UPDATE tasks SET status = 'succeeded' WHERE id = '{id}'"
        )],
        log: LogChange::None,
    }));
    cases.push(task.as_ref().map(|(id, was)| Case {
        invariant: "2:",
        what: "(a failure nothing explains)",
        break_sql: vec![format!(
            "UPDATE tasks SET status = 'failed', reason = 'failed' WHERE id = '{id}'"
        )],
        mend_sql: vec![format!(
            "UPDATE tasks SET status = 'succeeded', reason = {} WHERE id = '{id}'",
            reason(was)
        )],
        log: LogChange::None,
    }));
    // 2: a noop task that took a second attempt.
    let noop: Option<(Uuid,)> = one(
        evidence,
        "SELECT id FROM tasks WHERE kind = 'noop' AND status = 'succeeded' ORDER BY id LIMIT 1"
            .into(),
    )
    .await?;
    cases.push(noop.map(|(id,)| Case {
        invariant: "2:",
        what: "(a noop task at a second attempt)",
        break_sql: vec![format!("UPDATE tasks SET attempt = 2 WHERE id = '{id}'")],
        mend_sql: vec![format!("UPDATE tasks SET attempt = 1 WHERE id = '{id}'")],
        log: LogChange::None,
    }));
    // 3: the log and the attempts.
    let ran: Option<(Uuid, i32, String, Option<Uuid>)> = one(
        evidence,
        "SELECT a.task_id, a.attempt, coalesce(j.name, 'adhoc'), a.worker_id FROM task_attempts a
         JOIN tasks t ON t.id = a.task_id LEFT JOIN jobs j ON j.id = t.job_id
         WHERE a.outcome = 'succeeded' AND t.kind = 'shell'
         ORDER BY a.started_at LIMIT 1"
            .into(),
    )
    .await?;
    let now = jiff::Timestamp::now().as_nanosecond();
    cases.push(Some(Case {
        invariant: "3:",
        what: "(a command logged for no attempt)",
        break_sql: Vec::new(),
        mend_sql: Vec::new(),
        log: LogChange::Append(format!("start {} 1 stray {now}", Uuid::now_v7())),
    }));
    cases.push(ran.as_ref().map(|(task, attempt, job, _)| Case {
        invariant: "3:",
        what: "(an attempt started twice)",
        break_sql: Vec::new(),
        mend_sql: Vec::new(),
        log: LogChange::Append(format!("start {task} {attempt} {job} {now}")),
    }));
    cases.push(ran.as_ref().map(|(task, attempt, _, _)| Case {
        invariant: "3:",
        what: "(an attempt that ran without its log lines)",
        break_sql: Vec::new(),
        mend_sql: Vec::new(),
        log: LogChange::DropAttempt(*task, *attempt),
    }));
    cases.push(ran.as_ref().map(|(task, attempt, _, worker)| {
        let ghost = Uuid::now_v7();
        let worker = worker.map_or("NULL".into(), |w| format!("'{w}'"));
        Case {
            invariant: "3:",
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
        }
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
        Case {
            invariant: "4:",
            what: "(two tasks of a non-concurrent job at once)",
            break_sql: vec![format!(
                "UPDATE task_attempts SET started_at = started_at - interval '{back} ms'
                 WHERE task_id = '{task}' AND attempt = {attempt}"
            )],
            mend_sql: vec![format!(
                "UPDATE task_attempts SET started_at = started_at + interval '{back} ms'
                 WHERE task_id = '{task}' AND attempt = {attempt}"
            )],
            log: LogChange::None,
        }
    }));
    // 5: a task of the diamond failed.
    let fold: Option<(Uuid, Option<String>)> = one(
        evidence,
        format!(
            "SELECT t.id, t.reason FROM tasks t JOIN jobs j ON j.id = t.job_id
             WHERE j.name = '{}' AND t.status = 'succeeded' ORDER BY t.data_time LIMIT 1",
            DIAMOND[0]
        ),
    )
    .await?;
    cases.push(fold.map(|(id, was)| Case {
        invariant: "5:",
        what: "(a diamond task that failed)",
        break_sql: vec![format!(
            "UPDATE tasks SET status = 'failed', reason = 'lost' WHERE id = '{id}'"
        )],
        mend_sql: vec![format!(
            "UPDATE tasks SET status = 'succeeded', reason = {} WHERE id = '{id}'",
            reason(&was)
        )],
        log: LogChange::None,
    }));
    // 6: an outbox row never published (the services are stopped by now).
    cases.push(Some(Case {
        invariant: "6:",
        what: "(an outbox row never published)",
        break_sql: vec![
            "INSERT INTO outbox (exchange, routing_key, body)
             VALUES ('self-test', 'self-test', '{}'::jsonb)"
                .into(),
        ],
        mend_sql: vec!["DELETE FROM outbox WHERE exchange = 'self-test'".into()],
        log: LogChange::None,
    }));
    Ok(cases)
}
