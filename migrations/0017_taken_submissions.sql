-- A worker that records ad-hoc submissions runs those it has free slots for itself: such a task
-- is written `ready` under that worker (`worker_id`) with no task message, until its start. If
-- the worker is gone first, recovery publishes the message; this finds those rows, which live
-- for milliseconds, without reading every ready task.
CREATE INDEX tasks_taken_by_worker ON tasks (worker_id) WHERE status = 'ready' AND worker_id IS NOT NULL;
