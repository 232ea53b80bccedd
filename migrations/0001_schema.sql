-- chime's whole data model (DESIGN.md section 3).
--
-- Everything lives in the current schema (search_path), so one logical scheduler is one schema and
-- tests isolate themselves with their own database or schema. Timestamps are timestamptz (UTC).
-- `group_name` is Quartz's group: (group_name, name) is unique per kind and defaults to 'default'.

-- Worker groups: a group is a queue (`<prefix>.group.<name>`) that workers consume.
CREATE TABLE worker_groups (
    name        text PRIMARY KEY,
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO worker_groups (name, description) VALUES ('default', 'the default worker group');

-- The default worker group of a job kind (e.g. hive → etl).
CREATE TABLE job_kind_routes (
    kind         text PRIMARY KEY,
    worker_group text NOT NULL
);

CREATE TABLE jobs (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name         text NOT NULL DEFAULT 'default',
    name               text NOT NULL,
    description        text NOT NULL DEFAULT '',
    kind               text NOT NULL,
    spec               jsonb NOT NULL DEFAULT '{}',
    worker_group       text NOT NULL DEFAULT 'default',
    priority           integer NOT NULL DEFAULT 5,
    -- false = Quartz's @DisallowConcurrentExecution
    concurrent         boolean NOT NULL DEFAULT true,
    persist_data       boolean NOT NULL DEFAULT false,
    requests_recovery  boolean NOT NULL DEFAULT false,
    durable            boolean NOT NULL DEFAULT true,
    paused             boolean NOT NULL DEFAULT false,
    data               jsonb NOT NULL DEFAULT '{}',
    reject_retries     integer NOT NULL DEFAULT 0 CHECK (reject_retries >= 0),
    reject_interval_ms bigint NOT NULL DEFAULT 3000 CHECK (reject_interval_ms >= 0),
    failed_retries     integer NOT NULL DEFAULT 0 CHECK (failed_retries >= 0),
    failed_interval_ms bigint NOT NULL DEFAULT 3000 CHECK (failed_interval_ms >= 0),
    -- {"kind":"fixed"} or {"kind":"exponential","factor":2.0,"max_interval_ms":600000,"jitter":0.1}
    backoff            jsonb NOT NULL DEFAULT '{"kind":"fixed"}',
    timeout_ms         bigint CHECK (timeout_ms > 0),
    data_time_period   text CHECK (data_time_period IN ('minute', 'hour', 'day', 'week', 'month')),
    app_name           text,
    submit_user        text,
    execute_user       text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (group_name, name)
);

CREATE TABLE calendars (
    name        text PRIMARY KEY,
    definition  jsonb NOT NULL,
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE triggers (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name      text NOT NULL DEFAULT 'default',
    name            text NOT NULL,
    job_id          bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    description     text NOT NULL DEFAULT '',
    -- DESIGN.md section 4's schedule JSON
    schedule        jsonb NOT NULL,
    -- a calendar in use cannot be deleted
    calendar_name   text REFERENCES calendars (name) ON UPDATE CASCADE ON DELETE RESTRICT,
    misfire_policy  text NOT NULL DEFAULT 'smart' CHECK (misfire_policy IN (
                        'smart', 'fire_now', 'skip', 'fire_all',
                        'reschedule_now_with_existing_count', 'reschedule_now_with_remaining_count',
                        'reschedule_next_with_existing_count', 'reschedule_next_with_remaining_count')),
    priority        integer NOT NULL DEFAULT 5,
    state           text NOT NULL DEFAULT 'waiting' CHECK (state IN (
                        'waiting', 'acquired', 'blocked', 'paused', 'paused_blocked', 'complete', 'error')),
    start_time      timestamptz NOT NULL DEFAULT now(),
    end_time        timestamptz,
    next_fire_time  timestamptz,
    prev_fire_time  timestamptz,
    times_triggered bigint NOT NULL DEFAULT 0,
    data            jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (group_name, name)
);
-- The scheduler's acquisition: waiting triggers by next fire time, priority breaking ties.
CREATE INDEX triggers_due ON triggers (next_fire_time, priority DESC) WHERE state = 'waiting';
CREATE INDEX triggers_by_job ON triggers (job_id);
CREATE INDEX triggers_by_calendar ON triggers (calendar_name) WHERE calendar_name IS NOT NULL;

CREATE TABLE paused_trigger_groups (
    group_name text PRIMARY KEY,
    paused_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE scheduler_instances (
    instance_id         text PRIMARY KEY,
    host                text NOT NULL,
    pid                 integer NOT NULL,
    started_at          timestamptz NOT NULL DEFAULT now(),
    last_checkin        timestamptz NOT NULL DEFAULT now(),
    checkin_interval_ms bigint NOT NULL,
    version             text NOT NULL
);

CREATE TABLE workers (
    id             uuid PRIMARY KEY,
    name           text NOT NULL,
    host           text NOT NULL,
    pid            integer NOT NULL,
    groups         text[] NOT NULL,
    kinds          text[] NOT NULL,
    concurrency    integer NOT NULL CHECK (concurrency > 0),
    status         text NOT NULL CHECK (status IN ('online', 'draining', 'disconnected', 'offline')),
    version        text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat timestamptz NOT NULL DEFAULT now(),
    stopped_at     timestamptz
);
CREATE INDEX workers_live ON workers (last_heartbeat) WHERE status IN ('online', 'draining');

-- A task is one run of a job (or of an inline ad-hoc spec) for one data time. Its lifecycle is
-- documented in shared/src/store/task_lifecycle.rs, the one place that moves it.
CREATE TABLE tasks (
    id                 uuid PRIMARY KEY,
    job_id             bigint REFERENCES jobs (id) ON DELETE SET NULL,
    trigger_id         bigint REFERENCES triggers (id) ON DELETE SET NULL,
    -- what to run, copied from the job at creation so a running task is not changed by an edit
    kind               text NOT NULL,
    spec               jsonb NOT NULL,
    worker_group       text NOT NULL,
    priority           integer NOT NULL DEFAULT 5,
    status             text NOT NULL CHECK (status IN (
                           'waiting', 'ready', 'running', 'retrying', 'succeeded', 'failed', 'killed')),
    attempt            integer NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    -- the two retry budgets: rejections and failures never use each other's
    reject_retries     integer NOT NULL DEFAULT 0,
    reject_interval_ms bigint NOT NULL DEFAULT 3000,
    rejects            integer NOT NULL DEFAULT 0,
    failed_retries     integer NOT NULL DEFAULT 0,
    failed_interval_ms bigint NOT NULL DEFAULT 3000,
    failures           integer NOT NULL DEFAULT 0,
    backoff            jsonb NOT NULL DEFAULT '{"kind":"fixed"}',
    timeout_ms         bigint,
    requests_recovery  boolean NOT NULL DEFAULT false,
    data_time          timestamptz,
    data               jsonb NOT NULL DEFAULT '{}',
    worker_id          uuid,
    submit_user        text,
    execute_user       text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    ready_at           timestamptz,
    started_at         timestamptz,
    finished_at        timestamptz,
    next_attempt_at    timestamptz,
    -- why a task ended as it did: rejected, timeout, lost, killed, upstream_failed, …
    reason             text,
    -- {"exit_code":0,"output":"…tail…","error":null}
    result             jsonb
);
-- task list by status, newest first (ids are UUIDv7, so id order is creation order)
CREATE INDEX tasks_by_status ON tasks (status, id DESC);
-- release of retries whose time has come
CREATE INDEX tasks_retry_due ON tasks (next_attempt_at) WHERE status = 'retrying';
-- recovery of tasks left running by a dead worker
CREATE INDEX tasks_running_by_worker ON tasks (worker_id) WHERE status = 'running';
-- the dependency service and backfill: a job's task for a data time
CREATE INDEX tasks_by_job_data_time ON tasks (job_id, data_time) WHERE job_id IS NOT NULL;

CREATE TABLE task_attempts (
    task_id     uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    -- null while the attempt runs
    outcome     text CHECK (outcome IN ('rejected', 'failed', 'succeeded', 'killed', 'lost')),
    worker_id   uuid,
    worker_name text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    exit_code   integer,
    error       text,
    PRIMARY KEY (task_id, attempt)
);

-- Each (trigger, scheduled time) fires once: the unique key is the exactly-once guarantee.
CREATE TABLE fired_triggers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger_id  bigint REFERENCES triggers (id) ON DELETE SET NULL,
    job_id      bigint,
    task_id     uuid,
    instance_id text NOT NULL,
    sched_time  timestamptz NOT NULL,
    fired_time  timestamptz NOT NULL DEFAULT now(),
    priority    integer NOT NULL DEFAULT 5,
    state       text NOT NULL DEFAULT 'fired' CHECK (state IN ('fired', 'blocked', 'skipped')),
    UNIQUE (trigger_id, sched_time)
);

CREATE TABLE job_dependencies (
    job_id              bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    depends_on_job_id   bigint NOT NULL REFERENCES jobs (id) ON DELETE RESTRICT,
    "window"            text NOT NULL DEFAULT 'same' CHECK ("window" IN ('same', 'period')),
    on_upstream_failure text NOT NULL DEFAULT 'fail' CHECK (on_upstream_failure IN ('fail', 'wait')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, depends_on_job_id),
    CHECK (job_id <> depends_on_job_id)
);
CREATE INDEX job_dependencies_downstream ON job_dependencies (depends_on_job_id);

CREATE TABLE task_dependencies (
    task_id            uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    depends_on_job_id  bigint NOT NULL,
    depends_on_task_id uuid NOT NULL,
    satisfied          boolean NOT NULL DEFAULT false,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, depends_on_task_id)
);
CREATE INDEX task_dependencies_upstream ON task_dependencies (depends_on_task_id);

-- Every publish that follows a database change: the change and its outbox row commit together, the
-- relay publishes with confirms and marks the row sent. `publish_at` holds a message until its time.
CREATE TABLE outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    exchange      text NOT NULL,
    routing_key   text NOT NULL,
    body          jsonb NOT NULL,
    headers       jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    publish_at    timestamptz NOT NULL DEFAULT now(),
    -- a relay's lease on the row while it publishes; an expired lease is taken over
    claimed_until timestamptz,
    published_at  timestamptz
);
CREATE INDEX outbox_unsent ON outbox (publish_at, id) WHERE published_at IS NULL;

-- Wake the relays when rows are added (a hint: relays also poll). The channel is per schema so
-- logical schedulers sharing a database do not wake each other.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(current_schema() || '.outbox', '');
    RETURN NULL;
END;
$$;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
