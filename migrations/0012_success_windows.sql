-- A job may expect a success within a window (`--expect-success-within 25h`): when its latest
-- success (or, before its first, the moment the window was set) is older than that, every
-- webhook of the job and every global one gets one `job.success_overdue` delivery for that
-- deadline. `last_success_seen` is the latest success the schedulers' checks have seen, kept
-- so that the deadline never moves back (a rerun of that run in flight, its row pruned);
-- `success_overdue_notified` is the deadline last notified, so each missed deadline is notified
-- once, by one scheduler, in the transaction that records it.
ALTER TABLE jobs
    ADD COLUMN expect_success_within_ms bigint
        CHECK (expect_success_within_ms > 0 AND expect_success_within_ms <= 315360000000),
    ADD COLUMN expect_success_since timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN last_success_seen timestamptz,
    ADD COLUMN success_overdue_notified timestamptz;
CREATE INDEX jobs_expecting_success ON jobs (id) WHERE expect_success_within_ms IS NOT NULL;
