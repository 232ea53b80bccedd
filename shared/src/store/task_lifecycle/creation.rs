//! How tasks come to be: ad-hoc submissions (one or a batch), trigger fires and `job run`,
//! each with its task message or its `waiting` event in the outbox.

use std::collections::{HashMap, HashSet};

use serde_json::json;
use sqlx::types::Json;
use uuid::Uuid;

use super::{Submitted, WorkerIdentity};
use crate::bus::Topology;
use crate::model::{MESSAGE_VERSION, NewTask, TaskMessage, TaskView};
use crate::store::tasks::TaskRow;
use crate::store::{Context, Store, StoreError, kind_routes};

/// Creates a `ready` ad-hoc task and its task message, in one statement.
///
/// The group is resolved by [`kind_routes::resolve_group`]; an unknown kind is refused. With a
/// client-chosen id that exists already, nothing is written.
pub async fn submit(
    store: &Store,
    topology: &Topology,
    task: NewTask,
) -> Result<Submitted, StoreError> {
    let mut submitted = submit_many(store, topology, vec![task]).await?;
    submitted.pop().ok_or_else(|| StoreError::Database {
        context: "submitting the task",
        source: sqlx::Error::RowNotFound,
    })
}

/// `(nothing) → ready` for a batch of ad-hoc tasks: every task and its task message in one
/// statement (one commit). Returns one [`Submitted`] per task, in order. An unknown kind or group
/// refuses the whole batch; tasks whose client-chosen id exists already are skipped.
pub async fn submit_many(
    store: &Store,
    topology: &Topology,
    tasks: Vec<NewTask>,
) -> Result<Vec<Submitted>, StoreError> {
    let refs: Vec<&NewTask> = tasks.iter().collect();
    let groups = route_submissions(store, &refs)
        .await?
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let routed: Vec<(&NewTask, &str)> = refs
        .into_iter()
        .zip(groups.iter().map(String::as_str))
        .collect();
    submit_routed(store, topology, &routed).await
}

/// The worker group each ad-hoc task goes to, as [`kind_routes::resolve_group`] routes it, with
/// one lookup per distinct (kind, group). The outer error is the database's; an inner one is that
/// task's own refusal (an unknown kind or group), so a batch can refuse its bad submissions alone.
pub async fn route_submissions(
    store: &Store,
    tasks: &[&NewTask],
) -> Result<Vec<Result<String, StoreError>>, StoreError> {
    // A refusal is kept as what was refused, to be given to every task it applies to.
    let mut routes: std::collections::HashMap<(&str, Option<&str>), Result<String, Refusal>> =
        std::collections::HashMap::new();
    let mut groups = Vec::with_capacity(tasks.len());
    for task in tasks {
        let key = (task.kind.as_str(), task.group.as_deref());
        let route = match routes.entry(key) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(new) => new.insert(
                match kind_routes::resolve_group(store.pool(), key.0, key.1).await {
                    Ok(group) => Ok(group),
                    Err(StoreError::UnknownKind(kind)) => Err(Refusal::Kind(kind)),
                    Err(StoreError::UnknownGroup(group)) => Err(Refusal::Group(group)),
                    Err(error) => return Err(error),
                },
            ),
        };
        groups.push(match route {
            Ok(group) => Ok(group.clone()),
            Err(Refusal::Kind(kind)) => Err(StoreError::UnknownKind(kind.clone())),
            Err(Refusal::Group(group)) => Err(StoreError::UnknownGroup(group.clone())),
        });
    }
    Ok(groups)
}

/// Why a submission has no route.
enum Refusal {
    Kind(String),
    Group(String),
}

/// The statement that inserts routed ad-hoc tasks and their batched outbox row, returning
/// `$returning` from the inserted rows and answering with `$select` over them (`task`).
macro_rules! insert_submissions {
    ($returning:literal, $select:literal) => {
        concat!(
            r#"
        WITH new AS (
            -- a client-chosen id given twice in one batch makes one task and one message
            -- (the first of them: the one told it made the task)
            SELECT DISTINCT ON (id) * FROM UNNEST($1::uuid[], $2::text[], $3::jsonb[], $4::text[], $5::int[],
                                 $6::int[], $7::bigint[], $8::int[], $9::bigint[], $10::jsonb[],
                                 $11::bigint[], $12::bool[], $13::timestamptz[], $14::jsonb[],
                                 $15::text[], $16::text[], $17::jsonb[], $19::text[], $20::bool[])
                WITH ORDINALITY
                AS n(id, kind, spec, worker_group, priority, reject_retries, reject_interval_ms,
                     failed_retries, failed_interval_ms, backoff, timeout_ms, requests_recovery,
                     data_time, data, submit_user, execute_user, body, name, taken, ord)
            ORDER BY id, ord
        ), task AS (
            INSERT INTO tasks (id, kind, spec, worker_group, priority, status, attempt,
                               reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user, ready_at, name,
                               worker_id)
            SELECT id, kind, spec, worker_group, priority, 'ready', 1, reject_retries,
                   reject_interval_ms, failed_retries, failed_interval_ms, backoff, timeout_ms,
                   requests_recovery, data_time, data, submit_user, execute_user, now(), name,
                   -- a task the recording worker takes is ready, with no message, under it
                   CASE WHEN coalesce(taken, false) THEN $21::uuid END
            FROM new
            ON CONFLICT (id) DO NOTHING
            RETURNING "#,
            $returning,
            r#"
        ), message AS (
            -- every task message of the batch in one (batched) outbox row, but for the tasks
            -- the recording worker takes
            INSERT INTO outbox (exchange, routing_key, body, batched)
            SELECT $18, '', jsonb_agg(jsonb_build_object('k', new.worker_group, 'b', new.body)),
                   true
            FROM new JOIN task USING (id)
            WHERE NOT coalesce(new.taken, false)
            HAVING count(*) > 0
        )
"#,
            $select
        )
    };
}

/// Inserts and returns the ids of the tasks made.
const INSERT_SUBMISSIONS: &str = insert_submissions!("id", "SELECT id FROM task");

/// Inserts and returns the tasks made, as a task view reads them (an ad-hoc task has no job).
const INSERT_SUBMISSIONS_SHOWN: &str = insert_submissions!(
    "*",
    "SELECT id, status, attempt, job_id, NULL::text AS job_group, NULL::text AS job_name,
            NULL::text AS job_zone, kind, worker_group, spec, data, data_time, priority,
            timeout_ms, reason, created_at, started_at, finished_at, next_attempt_at, result,
            backfill_id, name
     FROM task"
);

/// `(nothing) → ready` for ad-hoc tasks already routed to their worker groups
/// ([`route_submissions`]): every task and its task message in one statement (one commit).
/// Returns one [`Submitted`] per task, in order; tasks whose client-chosen id exists already (or
/// came earlier in the batch) are not created again.
pub async fn submit_routed(
    store: &Store,
    topology: &Topology,
    tasks: &[(&NewTask, &str)],
) -> Result<Vec<Submitted>, StoreError> {
    let (messages, made) =
        insert_routed::<(Uuid,)>(store, topology, tasks, None, INSERT_SUBMISSIONS).await?;
    Ok(told_made(&messages, made))
}

/// [`submit_routed`] for a worker that records submissions and runs some of them itself: the
/// tasks whose `taken` is true are written `ready` under `worker` (`tasks.worker_id`) with no
/// task message, and their messages, for those this statement made, are returned for the worker
/// to start as if it had been delivered them. No other worker can start such a task until it is
/// published: when the worker gives it back, or when a scheduler finds its worker gone or the
/// task taken long ago ([`super::publish_unstarted_taken`]). `taken` has one flag per task.
pub async fn submit_routed_taking(
    store: &Store,
    topology: &Topology,
    worker: &WorkerIdentity,
    tasks: &[(&NewTask, &str)],
    taken: &[bool],
) -> Result<(Vec<Submitted>, Vec<TaskMessage>), StoreError> {
    let (messages, made) = insert_routed::<(Uuid,)>(
        store,
        topology,
        tasks,
        Some((worker, taken)),
        INSERT_SUBMISSIONS,
    )
    .await?;
    let submitted = told_made(&messages, made);
    let mine = taken_made(messages, &submitted, taken);
    Ok((submitted, mine))
}

/// The messages of the tasks flagged `taken` that the statement made, in order.
fn taken_made(
    messages: Vec<TaskMessage>,
    submitted: &[Submitted],
    taken: &[bool],
) -> Vec<TaskMessage> {
    messages
        .into_iter()
        .zip(submitted)
        .zip(taken)
        .filter(|((_, s), taken)| s.created && **taken)
        .map(|((message, _), _)| message)
        .collect()
}

/// One [`Submitted`] per message, in order, from the ids a statement made: a task made by it
/// counts as made by the first submission that gave its id.
fn told_made(messages: &[TaskMessage], made: Vec<(Uuid,)>) -> Vec<Submitted> {
    let mut made: HashSet<Uuid> = made.into_iter().map(|(id,)| id).collect();
    messages
        .iter()
        .map(|m| Submitted {
            id: m.task_id,
            created: made.remove(&m.task_id),
        })
        .collect()
}

/// What [`submit_routed_shown`] wrote.
#[derive(Debug)]
pub struct Shown {
    /// One per task given, in order.
    pub submitted: Vec<Submitted>,
    /// Each task this statement made, as a view of the row it wrote.
    pub views: HashMap<Uuid, TaskView>,
    /// The messages of the tasks this statement made under the taking worker, in order.
    pub taken: Vec<TaskMessage>,
}

/// [`submit_routed`], also returning each task it made as a view of the row it wrote (what
/// `POST /api/v1/tasks` answers with), without reading the rows again. With `taking`, the tasks
/// flagged are made under that worker with no task message, as [`submit_routed_taking`] makes
/// them, and their messages are returned for it to run.
pub async fn submit_routed_shown(
    store: &Store,
    topology: &Topology,
    tasks: &[(&NewTask, &str)],
    taking: Option<(&WorkerIdentity, &[bool])>,
) -> Result<Shown, StoreError> {
    let (messages, made) =
        insert_routed::<TaskRow>(store, topology, tasks, taking, INSERT_SUBMISSIONS_SHOWN).await?;
    let mut views = HashMap::with_capacity(made.len());
    for row in made {
        let view = row.into_view(Vec::new())?;
        views.insert(view.id, view);
    }
    let mut first = HashSet::with_capacity(views.len());
    let submitted: Vec<Submitted> = messages
        .iter()
        .map(|m| Submitted {
            id: m.task_id,
            created: views.contains_key(&m.task_id) && first.insert(m.task_id),
        })
        .collect();
    let flags = taking.map_or(&[][..], |(_, taken)| taken);
    let taken = taken_made(messages, &submitted, flags);
    Ok(Shown {
        submitted,
        views,
        taken,
    })
}

/// Runs an [`insert_submissions`] statement for `tasks` (those flagged taken by a worker, if
/// given, under it): their messages (with the ids given to them), in order, and the rows the
/// statement answered with.
async fn insert_routed<R>(
    store: &Store,
    topology: &Topology,
    tasks: &[(&NewTask, &str)],
    taking: Option<(&WorkerIdentity, &[bool])>,
    statement: &'static str,
) -> Result<(Vec<TaskMessage>, Vec<R>), StoreError>
where
    R: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    let mut messages = Vec::with_capacity(tasks.len());
    let mut settings = Vec::with_capacity(tasks.len());
    for &(task, group) in tasks {
        let or_empty = |v: serde_json::Value| if v.is_null() { json!({}) } else { v };
        messages.push(TaskMessage {
            v: MESSAGE_VERSION,
            task_id: task.id.unwrap_or_else(Uuid::now_v7),
            attempt: 1,
            kind: task.kind.clone(),
            group: group.to_string(),
            spec: or_empty(task.spec.clone()),
            data: or_empty(task.data.clone()),
            data_time: task.data_time,
            timeout_ms: task.timeout_ms,
            execute_user: task.execute_user.clone(),
        });
        let backoff = serde_json::to_value(task.backoff.clone().unwrap_or_default())
            .unwrap_or_else(|_| json!({"kind": "fixed"}));
        settings.push((
            task.priority.unwrap_or(5),
            task.reject_retries.unwrap_or(0),
            task.reject_interval_ms.unwrap_or(3000),
            task.failed_retries.unwrap_or(0),
            task.failed_interval_ms.unwrap_or(3000),
            backoff,
            task.requests_recovery.unwrap_or(false),
            task.submit_user.clone(),
            task.name.clone().filter(|n| !n.is_empty()),
        ));
    }
    if messages.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let ids: Vec<Uuid> = messages.iter().map(|m| m.task_id).collect();
    let kinds: Vec<&str> = messages.iter().map(|m| m.kind.as_str()).collect();
    let specs: Vec<Json<&serde_json::Value>> = messages.iter().map(|m| Json(&m.spec)).collect();
    let groups: Vec<&str> = messages.iter().map(|m| m.group.as_str()).collect();
    let data: Vec<Json<&serde_json::Value>> = messages.iter().map(|m| Json(&m.data)).collect();
    let data_times: Vec<Option<jiff_sqlx::Timestamp>> = messages
        .iter()
        .map(|m| m.data_time.map(jiff_sqlx::Timestamp::from))
        .collect();
    let timeouts: Vec<Option<i64>> = messages.iter().map(|m| m.timeout_ms).collect();
    let users: Vec<Option<&str>> = messages.iter().map(|m| m.execute_user.as_deref()).collect();
    let bodies: Vec<Json<&TaskMessage>> = messages.iter().map(Json).collect();
    let priorities: Vec<i32> = settings.iter().map(|s| s.0).collect();
    let reject_retries: Vec<i32> = settings.iter().map(|s| s.1).collect();
    let reject_intervals: Vec<i64> = settings.iter().map(|s| s.2).collect();
    let failed_retries: Vec<i32> = settings.iter().map(|s| s.3).collect();
    let failed_intervals: Vec<i64> = settings.iter().map(|s| s.4).collect();
    let backoffs: Vec<Json<&serde_json::Value>> = settings.iter().map(|s| Json(&s.5)).collect();
    let recovery: Vec<bool> = settings.iter().map(|s| s.6).collect();
    let submitters: Vec<Option<&str>> = settings.iter().map(|s| s.7.as_deref()).collect();
    let names: Vec<Option<&str>> = settings.iter().map(|s| s.8.as_deref()).collect();
    let made: Vec<R> = sqlx::query_as(statement)
        .bind(&ids)
        .bind(&kinds)
        .bind(&specs)
        .bind(&groups)
        .bind(&priorities)
        .bind(&reject_retries)
        .bind(&reject_intervals)
        .bind(&failed_retries)
        .bind(&failed_intervals)
        .bind(&backoffs)
        .bind(&timeouts)
        .bind(&recovery)
        .bind(&data_times)
        .bind(&data)
        .bind(&submitters)
        .bind(&users)
        .bind(&bodies)
        .bind(topology.tasks_exchange())
        .bind(&names)
        .bind(taking.map_or(&[][..], |(_, taken)| taken))
        .bind(taking.map(|(worker, _)| worker.id))
        .fetch_all(store.pool())
        .await
        .context("inserting the tasks")?;
    store.outbox_written();
    Ok((messages, made))
}

/// One fire of a trigger, as the scheduler records it.
#[derive(Debug, Clone)]
pub struct TriggerFire {
    /// The trigger.
    pub trigger_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The scheduled fire time: the task's data time, and when its message is released.
    pub sched_time: jiff::Timestamp,
    /// Priority of the fire.
    pub priority: i32,
    /// The task message (task id, spec, data …) to publish at `sched_time`.
    pub message: TaskMessage,
}

/// `(nothing) → ready | waiting` for a batch of trigger fires, in the caller's transaction: one
/// fired_triggers row and one task (copying its job's settings) per fire. A task of a job with
/// upstream dependencies is created `waiting`, with a `task.waiting` event for the dependency
/// service; any other task is `ready`, with its message in the outbox released at the fire time.
/// A (trigger, scheduled time) that fired already makes nothing: the unique key is the
/// exactly-once guarantee. Returns how many fires were new.
pub async fn record_trigger_fires(
    tx: &mut sqlx::PgConnection,
    topology: &Topology,
    instance_id: &str,
    fires: &[TriggerFire],
) -> Result<u64, StoreError> {
    if fires.is_empty() {
        return Ok(0);
    }
    let task_ids: Vec<Uuid> = fires.iter().map(|f| f.message.task_id).collect();
    let trigger_ids: Vec<i64> = fires.iter().map(|f| f.trigger_id).collect();
    let job_ids: Vec<i64> = fires.iter().map(|f| f.job_id).collect();
    let times: Vec<jiff_sqlx::Timestamp> = fires.iter().map(|f| f.sched_time.into()).collect();
    let data_times: Vec<jiff_sqlx::Timestamp> = fires
        .iter()
        .map(|f| f.message.data_time.unwrap_or(f.sched_time).into())
        .collect();
    let priorities: Vec<i32> = fires.iter().map(|f| f.priority).collect();
    let data: Vec<Json<&serde_json::Value>> = fires.iter().map(|f| Json(&f.message.data)).collect();
    let groups: Vec<&str> = fires.iter().map(|f| f.message.group.as_str()).collect();
    let bodies: Vec<Json<&TaskMessage>> = fires.iter().map(|f| Json(&f.message)).collect();
    // The row takes what its message says (the job as the scheduler read it), so a job changed
    // between that read and this insert cannot make a genuine message differ from its row.
    let kinds: Vec<&str> = fires.iter().map(|f| f.message.kind.as_str()).collect();
    let specs: Vec<Json<&serde_json::Value>> =
        fires.iter().map(|f| Json(&f.message.spec)).collect();
    let timeouts: Vec<Option<i64>> = fires.iter().map(|f| f.message.timeout_ms).collect();
    let users: Vec<Option<&str>> = fires
        .iter()
        .map(|f| f.message.execute_user.as_deref())
        .collect();
    let created: i64 = sqlx::query_scalar(
        r#"
        WITH fire AS (
            SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[], $4::timestamptz[],
                                 $5::int[], $6::jsonb[], $7::text[], $8::jsonb[],
                                 $11::timestamptz[], $13::text[], $14::jsonb[], $15::bigint[],
                                 $16::text[])
                AS f(task_id, trigger_id, job_id, sched_time, priority, data, worker_group, body,
                     data_time, kind, spec, timeout_ms, execute_user)
        ), fired AS (
            INSERT INTO fired_triggers (trigger_id, job_id, task_id, instance_id, sched_time,
                                        priority)
            SELECT trigger_id, job_id, task_id, $9, sched_time, priority FROM fire
            ON CONFLICT (trigger_id, sched_time) DO NOTHING
            RETURNING task_id
        ), task AS (
            INSERT INTO tasks (id, job_id, trigger_id, kind, spec, worker_group, priority, status,
                               attempt, reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user, ready_at)
            SELECT f.task_id, j.id, f.trigger_id, f.kind, f.spec, f.worker_group, f.priority,
                   CASE WHEN EXISTS (SELECT 1 FROM job_dependencies d WHERE d.job_id = j.id)
                        THEN 'waiting' ELSE 'ready' END,
                   1, j.reject_retries, j.reject_interval_ms, j.failed_retries,
                   j.failed_interval_ms, j.backoff, f.timeout_ms, j.requests_recovery,
                   f.data_time, f.data, j.submit_user, f.execute_user, f.sched_time
            FROM fire f JOIN fired USING (task_id) JOIN jobs j ON j.id = f.job_id
            RETURNING id, status, job_id, data_time, worker_group
        ), message AS (
            INSERT INTO outbox (exchange, routing_key, body, publish_at, headers)
            SELECT $10, f.worker_group, f.body, f.sched_time,
                   jsonb_build_object('x-chime-scheduled-time', f.sched_time)
            FROM fire f JOIN task ON task.id = f.task_id
            WHERE task.status = 'ready'
        ), waiting AS (
            INSERT INTO outbox (exchange, routing_key, body, publish_at)
            SELECT $12, 'task.waiting.' || task.worker_group,
                   task_event(task.id, 1, 'waiting', task.worker_group, task.job_id,
                              task.data_time, NULL, now()),
                   f.sched_time
            FROM fire f JOIN task ON task.id = f.task_id
            WHERE task.status = 'waiting'
        )
        SELECT count(*) FROM task
        "#,
    )
    .bind(&task_ids)
    .bind(&trigger_ids)
    .bind(&job_ids)
    .bind(&times)
    .bind(&priorities)
    .bind(&data)
    .bind(&groups)
    .bind(&bodies)
    .bind(instance_id)
    .bind(topology.tasks_exchange())
    .bind(&data_times)
    .bind(topology.events_exchange())
    .bind(&kinds)
    .bind(&specs)
    .bind(&timeouts)
    .bind(&users)
    .fetch_one(tx)
    .await
    .context("recording trigger fires")?;
    Ok(created as u64)
}

/// `(nothing) → ready` for a job run on demand (`chime job run`): a task with the job's settings,
/// its data overlaid with `data`, for `data_time` (default now) truncated to the job's data-time
/// period as a fire's would be, submitted by `submit_user`, published at once.
pub async fn run_job_now(
    store: &Store,
    topology: &Topology,
    group: &str,
    name: &str,
    data: serde_json::Value,
    data_time: Option<jiff::Timestamp>,
    submit_user: Option<&str>,
) -> Result<Uuid, StoreError> {
    crate::model::check_json("data", &data).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let size = data.to_string().len();
    if size > crate::model::MAX_PAYLOAD_BYTES {
        return Err(StoreError::Invalid(format!(
            "data is {size} bytes, the limit is {}",
            crate::model::MAX_PAYLOAD_BYTES
        )));
    }
    #[derive(sqlx::FromRow)]
    struct Job {
        id: i64,
        kind: String,
        spec: Json<serde_json::Value>,
        worker_group: String,
        data: Json<serde_json::Value>,
        timeout_ms: Option<i64>,
        execute_user: Option<String>,
        data_time_period: Option<String>,
        now: jiff_sqlx::Timestamp,
    }
    let job: Option<Job> = sqlx::query_as(
        "SELECT id, kind, spec, worker_group, data, timeout_ms, execute_user,
                period_in_zone(data_time_period, data_time_zone) AS data_time_period,
                now() AS now
         FROM jobs WHERE group_name = $1 AND name = $2",
    )
    .bind(group)
    .bind(name)
    .fetch_optional(store.pool())
    .await
    .context("reading the job")?;
    let job = job.ok_or_else(|| StoreError::NotFound(format!("job {group}.{name}")))?;
    let mut merged = job.data.0;
    if let (Some(base), Some(extra)) = (merged.as_object_mut(), data.as_object()) {
        for (key, value) in extra {
            base.insert(key.clone(), value.clone());
        }
    }
    let message = TaskMessage {
        v: MESSAGE_VERSION,
        task_id: Uuid::now_v7(),
        attempt: 1,
        kind: job.kind,
        group: job.worker_group,
        spec: job.spec.0,
        data: merged,
        data_time: Some(crate::store::dependencies::data_time_of(
            job.data_time_period.as_deref(),
            data_time.unwrap_or(job.now.to_jiff()),
        )),
        timeout_ms: job.timeout_ms,
        execute_user: job.execute_user,
    };
    sqlx::query(
        r#"
        WITH task AS (
            INSERT INTO tasks (id, job_id, kind, spec, worker_group, priority, status, attempt,
                               reject_retries, reject_interval_ms, failed_retries,
                               failed_interval_ms, backoff, timeout_ms, requests_recovery,
                               data_time, data, submit_user, execute_user, ready_at)
            -- kind, spec, group, timeout and user as the message says (the job as read above)
            SELECT $1, j.id, $8, $9, $10, j.priority, 'ready', 1,
                   j.reject_retries, j.reject_interval_ms, j.failed_retries, j.failed_interval_ms,
                   j.backoff, $11, j.requests_recovery, $3, $4,
                   coalesce($7, j.submit_user), $12, now()
            FROM jobs j WHERE j.id = $2
            RETURNING worker_group
        )
        INSERT INTO outbox (exchange, routing_key, body)
        SELECT $5, worker_group, $6 FROM task
        "#,
    )
    .bind(message.task_id)
    .bind(job.id)
    .bind(message.data_time.map(jiff_sqlx::Timestamp::from))
    .bind(Json(&message.data))
    .bind(topology.tasks_exchange())
    .bind(Json(&message))
    .bind(submit_user)
    .bind(&message.kind)
    .bind(Json(&message.spec))
    .bind(&message.group)
    .bind(message.timeout_ms)
    .bind(message.execute_user.as_deref())
    .execute(store.pool())
    .await
    .context("running the job")?;
    store.outbox_written();
    Ok(message.task_id)
}
