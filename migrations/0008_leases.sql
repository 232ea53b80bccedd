-- A worker owns its attempts by a lease: each heartbeat moves `lease_expires_at` to the
-- database's now() plus the lease, and recovery declares a worker dead only once that time has
-- passed (a lost session alone proves nothing: a frozen process keeps its processes running).
ALTER TABLE workers ADD COLUMN lease_expires_at timestamptz;

-- Crash recovery (and a standby's promotion) empties an UNLOGGED table: recovery refills this
-- one and, while it was filled less than the restart grace ago, declares no worker dead, since
-- every worker lost its session and its lease ran out while the database was away. A clean
-- restart keeps it and shows in pg_postmaster_start_time() instead.
CREATE UNLOGGED TABLE crash_marker (filled_at timestamptz NOT NULL);
-- Filled as of the beginning of time: a new store has had no crash.
INSERT INTO crash_marker (filled_at) VALUES ('-infinity');
