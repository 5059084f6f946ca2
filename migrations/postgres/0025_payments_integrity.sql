-- Payments integrity (PostgreSQL; as ../0025_payments_integrity.sql).
ALTER TABLE payments ADD COLUMN transfer_log_index BIGINT;
CREATE UNIQUE INDEX payments_by_transfer ON payments (network, transaction_signature, transfer_log_index)
    WHERE transfer_log_index IS NOT NULL;
ALTER TABLE command_breakers ADD COLUMN payers TEXT NOT NULL DEFAULT '';
ALTER TABLE payments ADD COLUMN refund_started_at BIGINT;
CREATE INDEX payments_refunded ON payments (network, payer, refund_started_at) WHERE refund_started_at IS NOT NULL;
