-- A refund becomes a state of its own (PostgreSQL; as ../0006_payment_refunds.sql).
ALTER TABLE payments DROP CONSTRAINT payments_state;
UPDATE payments SET state = 'refunding', refund_transfer_id = NULL
 WHERE refund_transfer_id = 'claimed' AND state IN ('settled', 'served');
UPDATE payments SET refund_transfer_id = NULL WHERE refund_transfer_id = 'claimed';
ALTER TABLE payments ADD CONSTRAINT payments_state
    CHECK (state IN ('verified', 'settled', 'served', 'refunding', 'refunded', 'failed'));
DROP INDEX payments_open;
CREATE INDEX payments_by_job ON payments (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX payments_open ON payments (state) WHERE state IN ('verified', 'settled', 'refunding');
