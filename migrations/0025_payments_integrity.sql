-- Payments integrity.
--
-- One on-chain transfer pays for one payment. A payment settled by a transaction we did
-- not send (a Base authorization relayed by the payer or a facilitator, perhaps in a batch
-- with others) records the index of the `Transfer` log that its own authorization made; a
-- transaction may carry several authorizations, each paying one payment, once. Our own
-- relays carry exactly one authorization each, so their transaction alone tells them apart.
ALTER TABLE payments ADD COLUMN transfer_log_index INTEGER;
CREATE UNIQUE INDEX payments_by_transfer ON payments (network, transaction_signature, transfer_log_index)
    WHERE transfer_log_index IS NOT NULL;

-- A paid command's breaker counts at most one failure per payer in its window, and never
-- gives its trial to a payer whose failure opened it: the payers it counted, one a line.
ALTER TABLE command_breakers ADD COLUMN payers TEXT NOT NULL DEFAULT '';

-- When a payment's refund started: its payer waits out a cool-off before paying again (a
-- refund costs the agent a fee, and some failures a payer can provoke).
ALTER TABLE payments ADD COLUMN refund_started_at INTEGER;
CREATE INDEX payments_refunded ON payments (network, payer, refund_started_at) WHERE refund_started_at IS NOT NULL;
