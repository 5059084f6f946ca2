-- Pricing by use (PostgreSQL; as ../0032_pricing_by_use.sql).
ALTER TABLE agents ADD COLUMN x402_chat_by_use TEXT;
ALTER TABLE payments ADD COLUMN scheme TEXT NOT NULL DEFAULT 'exact' CHECK (scheme IN ('exact', 'upto'));
ALTER TABLE payments ADD COLUMN max_amount BIGINT;
ALTER TABLE payments ADD COLUMN used TEXT;
ALTER TABLE payments DROP CONSTRAINT payments_amount_check;
ALTER TABLE payments ADD CONSTRAINT payments_amount_check CHECK (amount > 0 OR scheme = 'upto');
