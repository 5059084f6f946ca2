-- Payments the service stops working on and hands to its operator.
--
-- A refund stops once `x402_refund_max_attempts` of its transfers went out and failed, or
-- they cost the agent `x402_refund_max_fee_*` in fees: each one costs another fee.
-- `refund_attempts` counts those transfers; `refund_fees` what they cost, in the network's
-- smallest unit (lamports, wei).
ALTER TABLE payments ADD COLUMN refund_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN refund_fees INTEGER NOT NULL DEFAULT 0;

-- When the service stopped working on a payment: a refund past its bounds, or a
-- facilitated settlement the chain cannot decide. Recovery leaves it until the operator
-- gives it back (`agent-host payments resume`); `needs_operator` says why.
ALTER TABLE payments ADD COLUMN needs_operator_at INTEGER;
ALTER TABLE payments ADD COLUMN needs_operator TEXT;
