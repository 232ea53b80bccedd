-- Retry budgets with backoff, kill requests, and the task event's JSON, each written once here so
-- every transition in shared/src/store/task_lifecycle.rs computes them the same way.

-- How long retry number `retry` (1 for the first retry) of a budget waits: `interval_ms` with the
-- task's backoff, `{"kind":"fixed"}` or
-- `{"kind":"exponential","factor":2.0,"max_interval_ms":600000,"jitter":0.1}`:
-- interval × factor^(retry-1), capped, then ± jitter × that (never below zero). Whatever the
-- numbers, no retry waits more than 30 days (so the arithmetic cannot overflow a timestamp).
CREATE FUNCTION retry_delay(backoff jsonb, interval_ms bigint, retry integer)
RETURNS interval LANGUAGE sql VOLATILE AS $$
    SELECT make_interval(secs => least(2592000000.0, greatest(0.0, CASE
        WHEN backoff->>'kind' = 'exponential' THEN
            least(interval_ms * power(coalesce((backoff->>'factor')::float8, 2.0),
                                      least(greatest(retry - 1, 0), 200)),
                  coalesce((backoff->>'max_interval_ms')::float8, 600000.0))
            * (1.0 + coalesce((backoff->>'jitter')::float8, 0.1) * (2.0 * random() - 1.0))
        ELSE interval_ms::float8
    END)) / 1000.0)
$$;

-- Whether an attempt that ended with `outcome` leaves its task a retry: a rejection spends the
-- reject budget, a failure the failed budget, never each other's.
CREATE FUNCTION retries_left(outcome text, rejects integer, reject_retries integer,
                             failures integer, failed_retries integer)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT (outcome = 'rejected' AND rejects < reject_retries)
        OR (outcome = 'failed' AND failures < failed_retries)
$$;

-- A task's lifecycle event (model::TaskEvent), published to `<prefix>.events` with routing key
-- `task.<status>.<group>`.
CREATE FUNCTION task_event(task_id uuid, attempt integer, status text, worker_group text,
                           job_id bigint, data_time timestamptz, reason text, at timestamptz)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('v', 1, 'task_id', task_id, 'attempt', attempt, 'status', status,
                              'group', worker_group, 'job_id', job_id, 'data_time', data_time,
                              'reason', reason, 'at', at)
$$;

-- `chime task kill` on a running task: the worker running it is told through the control
-- exchange; if that worker is gone, recovery ends the task as killed instead of re-running it.
ALTER TABLE tasks ADD COLUMN kill_requested_at timestamptz;
