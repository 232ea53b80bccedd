-- An outbox row may carry many messages for one exchange: a `batched` row's body is a JSON array
-- of {"k": routing key, "b": message body}. A batch of task transitions (a worker's finished
-- attempts, a batch of submissions) writes one row instead of one per message; the relay
-- publishes each message and marks the row sent once all are confirmed (a retry re-publishes
-- them all: consumers are idempotent per (task, attempt)).
ALTER TABLE outbox ADD COLUMN batched boolean NOT NULL DEFAULT false;
