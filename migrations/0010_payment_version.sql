-- The x402 version each payment arrived in (1: X-PAYMENT, 2: PAYMENT-SIGNATURE). Payments
-- recorded before version 2 was served were all version 1.
ALTER TABLE payments ADD COLUMN x402_version INTEGER NOT NULL DEFAULT 1;
