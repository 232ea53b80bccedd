-- A task with a `backfill_id` is one of two things. The backfill's own job's tasks wait for
-- their turn (the backfill promotes `parallelism` at a time); its downstream jobs' tasks, made
-- as the backfill's lineage, wait for their upstreams like any other. Advancing, reopening and
-- the dependency sweep skip only the first kind: before this, they skipped both, so a
-- backfilled chain's `upstream_failed` tasks never came back on a rerun.
CREATE FUNCTION awaits_backfill_turn(backfill bigint, job bigint) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT backfill IS NOT NULL
       AND EXISTS (SELECT 1 FROM backfills b WHERE b.id = backfill AND b.job_id = job)
$$;
