-- The x402 version each payment arrived in (PostgreSQL; as ../0010_payment_version.sql).
ALTER TABLE payments ADD COLUMN x402_version BIGINT NOT NULL DEFAULT 1;
