-- Each attempt keeps its own output tail (not only the task's last result), and a running
-- attempt's output is written there as it grows, so it can be followed while it runs.
ALTER TABLE task_attempts ADD COLUMN output text;

-- A backfill's progress counts its tasks by status, ended ones included; only backfill tasks
-- have an entry.
CREATE INDEX tasks_by_backfill ON tasks (backfill_id, status) WHERE backfill_id IS NOT NULL;

-- A job's data-time period is taken in a zone: a daily job in Asia/Shanghai has its data times at
-- local midnight. Readers get period and zone as one value, `day` or `day@Asia/Shanghai`.
ALTER TABLE jobs ADD COLUMN data_time_zone text NOT NULL DEFAULT 'UTC';
CREATE FUNCTION period_in_zone(period text, zone text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT period || CASE WHEN zone = 'UTC' THEN '' ELSE '@' || zone END
$$;

-- A job may keep its history longer or shorter than the installation's retention.
ALTER TABLE jobs ADD COLUMN retention_days integer CHECK (retention_days > 0);

-- How many bytes a running attempt had printed when its output was last written: a follower
-- sends exactly what was added, even once the bounded tail has started to slide.
ALTER TABLE task_attempts ADD COLUMN output_bytes bigint;
