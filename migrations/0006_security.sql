-- Safe by default: API tokens with roles, the audit trail of changes, and what a task was asked to
-- run as (see shared/src/store/tokens.rs and shared/src/store/audit.rs).

-- An API token. Only the SHA-256 of its secret is kept: the secret is printed once, at creation.
-- A revoked token keeps its row (the audit trail names it); its name may be given again.
CREATE TABLE api_tokens (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text NOT NULL,
    role           text NOT NULL CHECK (role IN ('read', 'operate', 'admin')),
    -- the OS users a task submitted with this token may ask to run as ('*': any)
    execute_users  text[] NOT NULL DEFAULT '{}',
    secret_sha256  bytea NOT NULL UNIQUE,
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;
-- "is authentication on?": any live token
CREATE INDEX api_tokens_live ON api_tokens (id) WHERE revoked_at IS NULL;

-- Who changed what through the API: kills, reruns, runs, pauses, jobs, triggers, calendars,
-- routes, groups and tokens (submissions are recorded on the task as submit_user).
CREATE TABLE audit_events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    action  text NOT NULL,
    target  text NOT NULL,
    status  integer NOT NULL
);

-- Worker groups are declared (`chime group create`): a job or a kind route naming an unknown
-- group is refused, so a typo makes no queue. Groups already in use are declared here.
INSERT INTO worker_groups (name)
    SELECT worker_group FROM jobs UNION SELECT worker_group FROM job_kind_routes
    ON CONFLICT DO NOTHING;
ALTER TABLE jobs ADD FOREIGN KEY (worker_group) REFERENCES worker_groups (name);
ALTER TABLE job_kind_routes ADD FOREIGN KEY (worker_group) REFERENCES worker_groups (name);
CREATE INDEX jobs_by_worker_group ON jobs (worker_group);
CREATE INDEX job_kind_routes_by_worker_group ON job_kind_routes (worker_group);
-- A group's live tasks (group list, refusing to delete a group with work in it) are found through
-- tasks_live_by_status: an index of its own would cost every task write for a rare admin read.
