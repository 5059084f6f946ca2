-- Payments the service stops working on and hands to its operator.
--
-- A refund is tried at most `x402_refund_max_attempts` times, and stops once its failed
-- transfers cost the agent `x402_refund_max_fee_*` in fees: each failed attempt costs
-- another fee. `refund_attempts` counts the transfers a refund named; `refund_fees` what its
-- failed transfers cost, in the network's smallest unit (lamports, wei).
ALTER TABLE payments ADD COLUMN refund_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN refund_fees INTEGER NOT NULL DEFAULT 0;

-- When the service stopped working on a payment: a refund past its bounds, or a
-- facilitated settlement the chain cannot decide. Recovery leaves it; the operator finishes
-- it (`agent-host payments resume`), and `needs_operator` says why.
ALTER TABLE payments ADD COLUMN needs_operator_at INTEGER;
ALTER TABLE payments ADD COLUMN needs_operator TEXT;
