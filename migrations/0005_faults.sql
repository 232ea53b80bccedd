-- Trust under faults: blocked triggers found by the scheduler's unblock pass, workers' liveness
-- sessions, and tasks whose message may have been lost on the bus.

-- The scheduler's pass that lets a blocked trigger fire once its job is free again.
CREATE INDEX triggers_blocked ON triggers (job_id) WHERE state = 'blocked';
-- Whether a job has a live task (non-concurrent jobs, the unblock pass): found without walking
-- the job's whole history.
CREATE INDEX tasks_live_by_job ON tasks (job_id) WHERE status IN ('ready', 'running', 'retrying');

-- A worker holds a session-level advisory lock on this key on its own PostgreSQL connection for as
-- long as it lives; PostgreSQL releases it the moment the process dies, which is how recovery
-- tells a dead worker from a silent one (shared/src/store/workers.rs).
ALTER TABLE workers ADD COLUMN liveness_key bigint;

-- When a ready task's message was last re-published because no worker had started it: the
-- database is the truth, so a message lost on the bus (dead-lettered, or dropped with a queue) is
-- published again from the row.
ALTER TABLE tasks ADD COLUMN republished_at timestamptz;
