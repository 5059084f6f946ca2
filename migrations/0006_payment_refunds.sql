-- A refund becomes a state of its own: 'refunding' holds the refund's transfer id from
-- before the transfer is written, so a refund cut off by a crash is found, finished or
-- retried at the next start, and never sent twice. States, forward only:
-- verified -> settled -> served | refunding -> refunded; verified -> failed (nothing taken).
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
    state                 TEXT NOT NULL CHECK (state IN ('verified', 'settled', 'served', 'refunding', 'refunded', 'failed')),
    transaction_signature TEXT,                                  -- the settlement transaction
    raw_tx                TEXT,
    job_id                TEXT,
    refund_transfer_id    TEXT,                                  -- set when the refund starts
    error                 TEXT,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
-- A refund claimed under 0005 ('claimed' marker) is a refund under way.
INSERT INTO payments_next
SELECT id, identity, agent_id, network, payer, pay_to, amount, command, request,
       CASE WHEN refund_transfer_id = 'claimed' AND state IN ('settled', 'served') THEN 'refunding' ELSE state END,
       transaction_signature, raw_tx, job_id,
       CASE WHEN refund_transfer_id = 'claimed' THEN NULL ELSE refund_transfer_id END,
       error, created_at, updated_at
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_next RENAME TO payments;
CREATE INDEX payments_by_agent ON payments (agent_id, created_at);
CREATE INDEX payments_by_job ON payments (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX payments_open ON payments (state) WHERE state IN ('verified', 'settled', 'refunding');
