-- Hardening of x402 payments (PostgreSQL; as ../0007_payment_hardening.sql): the
-- 'refund_owed' state, valid_until and failed_on_chain_at.
ALTER TABLE payments DROP CONSTRAINT payments_state;
ALTER TABLE payments ADD CONSTRAINT payments_state
    CHECK (state IN ('verified', 'settled', 'served', 'refund_owed', 'refunding', 'refunded', 'failed'));
ALTER TABLE payments ADD COLUMN valid_until BIGINT;
ALTER TABLE payments ADD COLUMN failed_on_chain_at BIGINT;
DROP INDEX payments_open;
CREATE INDEX payments_open ON payments (state) WHERE state IN ('verified', 'settled', 'refund_owed', 'refunding');
CREATE INDEX payments_failed_on_chain ON payments (network, payer, failed_on_chain_at) WHERE failed_on_chain_at IS NOT NULL;
