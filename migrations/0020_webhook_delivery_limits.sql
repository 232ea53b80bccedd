-- A webhook delivery is tried a bounded number of times: a receiver gone for good no longer has
-- its deliveries retried for ever. A delivery that ran out of tries is kept, marked, and shown
-- (`webhook list`), until retention removes it with the delivered ones.
ALTER TABLE webhook_deliveries ADD COLUMN gave_up_at timestamptz;
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
-- Retention walks deliveries by age.
CREATE INDEX webhook_deliveries_by_creation ON webhook_deliveries (created_at);
