-- Every long-running service instance checks in, not only schedulers: a dependency service or an
-- API that is missing or dead shows in `chime services` and on the overview, rather than
-- stalling downstream tasks silently.
ALTER TABLE scheduler_instances RENAME TO service_instances;
ALTER TABLE service_instances ADD COLUMN kind text NOT NULL DEFAULT 'scheduler';
ALTER TABLE service_instances ALTER COLUMN kind DROP DEFAULT;
CREATE INDEX service_instances_by_kind ON service_instances (kind, last_checkin);
