-- Payments handed to the operator (PostgreSQL; as ../0026_payments_for_the_operator.sql).
ALTER TABLE payments ADD COLUMN refund_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN refund_fees BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN needs_operator_at BIGINT;
ALTER TABLE payments ADD COLUMN needs_operator TEXT;
