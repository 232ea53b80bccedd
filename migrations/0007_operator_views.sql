-- Each attempt keeps its own output tail (not only the task's last result), and a running
-- attempt's output is written there as it grows, so it can be followed while it runs.
ALTER TABLE task_attempts ADD COLUMN output text;

-- A backfill's progress counts its tasks by status, ended ones included; only backfill tasks
-- have an entry.
CREATE INDEX tasks_by_backfill ON tasks (backfill_id, status) WHERE backfill_id IS NOT NULL;
