-- A worker has two kinds of slot since noop and http tasks run in their own queue: processes
-- (`concurrency`, shell and command templates) and inline ones (noop, http). 0 for a worker of
-- an earlier version, which ran every kind in its process slots.
ALTER TABLE workers ADD COLUMN inline_concurrency integer NOT NULL DEFAULT 0;
