-- Failure notifications: a webhook is POSTed (JSON) when a task fails for good, for every task
-- (job_id NULL) or one job's. A delivery row is written by the same transaction that fails the
-- task — a trigger on `tasks`, so every path to `failed` (an attempt's end, a lost attempt, an
-- upstream's failure, a kill's timeout) is covered once — and delivered by the schedulers with
-- retries until the receiver answers 2xx.
CREATE TABLE webhooks (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint REFERENCES jobs (id) ON DELETE CASCADE,
    url        text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_by_job ON webhooks (job_id);

CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      bigint NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    body            jsonb NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL;
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id);

CREATE FUNCTION notify_task_failed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (webhook_id, body)
    SELECT w.id, jsonb_build_object(
               'v', 1, 'event', 'task.failed', 'task_id', NEW.id, 'attempt', NEW.attempt,
               'job', (SELECT j.group_name || '.' || j.name FROM jobs j WHERE j.id = NEW.job_id),
               'worker_group', NEW.worker_group, 'data_time', NEW.data_time,
               'reason', NEW.reason, 'error', NEW.result->>'error',
               'exit_code', (NEW.result->>'exit_code')::int, 'at', now())
    FROM webhooks w
    WHERE w.job_id IS NULL OR w.job_id = NEW.job_id;
    RETURN NULL;
END
$$;
-- Only a move into `failed` runs the function; every other update pays one comparison.
CREATE TRIGGER task_failed_update AFTER UPDATE OF status ON tasks FOR EACH ROW
    WHEN (NEW.status = 'failed' AND OLD.status IS DISTINCT FROM 'failed')
    EXECUTE FUNCTION notify_task_failed();
CREATE TRIGGER task_failed_insert AFTER INSERT ON tasks FOR EACH ROW
    WHEN (NEW.status = 'failed')
    EXECUTE FUNCTION notify_task_failed();
