-- A worker owns its attempts by a lease: each heartbeat moves `lease_expires_at` to the
-- database's now() plus the lease, and recovery declares a worker dead only once that time has
-- passed (a lost session alone proves nothing: a frozen process keeps its processes running).
ALTER TABLE workers ADD COLUMN lease_expires_at timestamptz;

-- When recovery first saw the database server running since its last start: for the restart
-- grace after that, recovery declares no worker dead, since every worker lost its session and its
-- lease ran out while the database was away. Counted from when recovery first saw the server up,
-- not from pg_postmaster_start_time(): a worker the server refused while starting holds its lease
-- for the grace from that refusal, which may come well after the postmaster started. A clean
-- restart shows as a new start time; crash recovery (and a standby's promotion) empties an
-- UNLOGGED table, so a crash shows as no row at all.
CREATE UNLOGGED TABLE server_starts (
    postmaster_started_at timestamptz PRIMARY KEY,
    first_seen_at timestamptz NOT NULL
);
-- Seen at the beginning of time: a new store has had no restart.
INSERT INTO server_starts (postmaster_started_at, first_seen_at)
VALUES (pg_postmaster_start_time(), '-infinity');
