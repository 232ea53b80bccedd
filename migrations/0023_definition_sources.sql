-- Definitions as code (`chime apply`): each object an apply makes or updates records its source
-- (`--source`, by default the directory or file applied), so `--prune` deletes only what the
-- same source made and no longer holds; NULL is made by hand (the API, the CLI, an import).
-- A trigger also keeps the `paused` its source's files said at the last apply: a file's value
-- is applied only when it changed there, so an operator's pause outlives the next deploy.
-- Dependencies belong to their downstream job's source.
ALTER TABLE jobs ADD COLUMN source text;
ALTER TABLE triggers ADD COLUMN source text, ADD COLUMN source_paused boolean;
ALTER TABLE calendars ADD COLUMN source text;
ALTER TABLE worker_groups ADD COLUMN source text;
ALTER TABLE job_kind_routes ADD COLUMN source text;
-- An apply's changes in the audit trail name the source they came from.
ALTER TABLE audit_events ADD COLUMN source text;

-- A prune reads what one source made.
CREATE INDEX jobs_source ON jobs (source) WHERE source IS NOT NULL;
CREATE INDEX triggers_source ON triggers (source) WHERE source IS NOT NULL;
