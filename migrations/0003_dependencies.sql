-- The dependency service (DESIGN.md section 5) and backfills.

-- A backfill: a task for every fire time of a job's triggers in [from_time, to_time], at most
-- `parallelism` of them ready or running at once (1 = serial).
CREATE TABLE backfills (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id          bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    from_time       timestamptz NOT NULL,
    to_time         timestamptz NOT NULL,
    parallelism     integer NOT NULL CHECK (parallelism > 0),
    -- downstream jobs with triggers of their own also get tasks for the backfilled data times
    with_downstream boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- The backfill a task belongs to (its own job's tasks) or descends from (downstream tasks made
-- for its data times).
ALTER TABLE tasks ADD COLUMN backfill_id bigint REFERENCES backfills (id) ON DELETE SET NULL;
CREATE INDEX tasks_backfill_queue ON tasks (backfill_id, data_time)
    WHERE backfill_id IS NOT NULL AND status IN ('waiting', 'ready', 'running', 'retrying');
-- a downstream job's waiting task for a data time
CREATE INDEX tasks_waiting_by_job ON tasks (job_id, data_time) WHERE status = 'waiting';

-- Each (job, data time) is advanced by its dependencies once: made ready (or created), or failed
-- because an upstream failed. The primary key is the exactly-once guarantee, under duplicate
-- events and any number of dependency services.
CREATE TABLE dependency_advances (
    job_id    bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    data_time timestamptz NOT NULL,
    outcome   text NOT NULL CHECK (outcome IN ('ready', 'failed')),
    task_id   uuid,
    at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, data_time)
);

-- Task lists by status, without an index entry per finished task: every status change of a
-- task used to add one to tasks_by_status (a status is in every key), the largest index cost of
-- a task's life. Live statuses and the rare failed/killed ones are indexed; `succeeded`, by far
-- the commonest, is listed by walking the primary key (ids are time-ordered) newest first.
DROP INDEX tasks_by_status;
CREATE INDEX tasks_live_by_status ON tasks (status, id DESC)
    WHERE status IN ('waiting', 'ready', 'running', 'retrying');
CREATE INDEX tasks_unsuccessful ON tasks (status, id DESC) WHERE status IN ('failed', 'killed');
