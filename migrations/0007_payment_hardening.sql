-- Hardening of x402 payments:
-- * 'refund_owed': a refund that cannot be paid yet because the payer has no account to
--   receive it (a refund never creates one at the agent's expense); retried later.
-- * valid_until: the block height after which a Solana settlement can no longer land, so
--   a stuck one is declared failed while the service runs.
-- * failed_on_chain_at: the settlement landed and failed, so the agent paid its fee; the
--   payer is refused for a while after.
-- States, forward only: verified -> settled -> served | refunding -> refunded;
-- settled | served -> refund_owed -> refunding; verified -> failed (nothing taken).
-- SQLite cannot alter a CHECK constraint: the table is rebuilt with the same columns.
CREATE TABLE payments_next (
    id                    TEXT PRIMARY KEY,
    identity              TEXT NOT NULL UNIQUE,
    agent_id              TEXT NOT NULL,
    network               TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    payer                 TEXT NOT NULL,
    pay_to                TEXT NOT NULL,
    amount                INTEGER NOT NULL CHECK (amount > 0),   -- micro-USDC
    command               TEXT,                                  -- null: a message
    request               TEXT NOT NULL,                         -- the JSON body
    state                 TEXT NOT NULL CHECK (state IN ('verified', 'settled', 'served', 'refund_owed', 'refunding', 'refunded', 'failed')),
    transaction_signature TEXT,                                  -- the settlement transaction
    raw_tx                TEXT,
    valid_until           INTEGER,                               -- Solana: last block height it can land at
    job_id                TEXT,
    refund_transfer_id    TEXT,                                  -- set when the refund starts
    error                 TEXT,
    failed_on_chain_at    INTEGER,                               -- landed and failed: the agent paid the fee
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
INSERT INTO payments_next
SELECT id, identity, agent_id, network, payer, pay_to, amount, command, request, state,
       transaction_signature, raw_tx, NULL, job_id, refund_transfer_id, error, NULL, created_at, updated_at
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_next RENAME TO payments;
CREATE INDEX payments_by_agent ON payments (agent_id, created_at);
CREATE INDEX payments_by_job ON payments (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX payments_open ON payments (state) WHERE state IN ('verified', 'settled', 'refund_owed', 'refunding');
CREATE INDEX payments_failed_on_chain ON payments (network, payer, failed_on_chain_at) WHERE failed_on_chain_at IS NOT NULL;
