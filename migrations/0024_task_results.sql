-- A task's result value (the JSON a shell task writes to $CHIME_RESULT_FILE, or an http task's
-- JSON response body) is kept with each attempt, as its output is; the task's own `result`
-- (jsonb) holds its last attempt's, under `value`. Retention removes both with the task.
ALTER TABLE task_attempts ADD COLUMN value jsonb;
