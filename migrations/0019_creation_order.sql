-- Lists and retention go by when a task was made, not by its id: a caller may choose the id
-- (Python's uuid4() by default), and such an id sorts anywhere. Ids chime makes are UUIDv7 and
-- were the creation order; the lists walked the primary key. They walk this index now, newest
-- first, with the id breaking ties within one transaction (whose tasks share `created_at`).
CREATE INDEX tasks_by_creation ON tasks (created_at, id);

-- The status lists, likewise newest by creation first.
DROP INDEX tasks_live_by_status;
CREATE INDEX tasks_live_by_status ON tasks (status, created_at DESC, id DESC)
    WHERE status IN ('waiting', 'ready', 'running', 'retrying');
DROP INDEX tasks_unsuccessful;
CREATE INDEX tasks_unsuccessful ON tasks (status, created_at DESC, id DESC)
    WHERE status IN ('failed', 'killed');

-- Whether an upstream run for `upstream_time` is one that a downstream task for `downstream_time`
-- waits for, under the dependency's `window` and the downstream job's data-time period and zone:
-- `same` (or no period) the one data time, `period` every data time of the downstream's period.
-- Retention keeps only those runs for a waiting task (it kept the upstream job's whole history).
CREATE FUNCTION in_dependency_window(dependency_window text, period text, zone text,
                                     downstream_time timestamptz, upstream_time timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN dependency_window = 'period' AND period IS NOT NULL THEN
            upstream_time >= date_trunc(period, downstream_time, zone)
            AND upstream_time < ((date_trunc(period, downstream_time, zone) AT TIME ZONE zone)
                                 + ('1 ' || period)::interval) AT TIME ZONE zone
        ELSE upstream_time = downstream_time
    END
$$;
