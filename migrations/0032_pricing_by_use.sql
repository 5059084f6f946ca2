-- Pricing by use (x402's `upto` scheme, docs/x402.md).
-- `agents.x402_chat_by_use`: the manifest's `[x402.chat_by_use]` (JSON), NULL when a
-- message has a fixed price only.
ALTER TABLE agents ADD COLUMN x402_chat_by_use TEXT;
-- Payments gain their scheme and, for `upto`, the maximum the payer authorized and what
-- the request used (JSON), recorded before its settlement is sent. `amount` is what the
-- payment charges: the price (`exact`); for `upto`, the maximum while the work runs, then
-- the charge for what was used, which may be 0 (nothing is settled then); an `exact`
-- payment is never for nothing.
-- SQLite cannot alter a CHECK constraint: the table is rebuilt with the same columns.
CREATE TABLE payments_next (
    id                    TEXT PRIMARY KEY,
    identity              TEXT NOT NULL UNIQUE,
    agent_id              TEXT NOT NULL,
    network               TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    payer                 TEXT NOT NULL,
    pay_to                TEXT NOT NULL,
    amount                INTEGER NOT NULL,                      -- micro-USDC
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
    updated_at            INTEGER NOT NULL,
    x402_version          INTEGER NOT NULL DEFAULT 1,
    payment_ref           TEXT,
    answer                TEXT,
    answer_expires_at     INTEGER,
    facilitator           TEXT,
    transfer_log_index    INTEGER,
    refund_started_at     INTEGER,
    refund_attempts       INTEGER NOT NULL DEFAULT 0,
    refund_fees           INTEGER NOT NULL DEFAULT 0,
    needs_operator_at     INTEGER,
    needs_operator        TEXT,
    scheme                TEXT NOT NULL DEFAULT 'exact' CHECK (scheme IN ('exact', 'upto')),
    max_amount            INTEGER,                               -- upto: the maximum authorized
    used                  TEXT,                                  -- upto: what the request used (JSON)
    CHECK (amount > 0 OR scheme = 'upto')                        -- only use may cost nothing
);
INSERT INTO payments_next
SELECT id, identity, agent_id, network, payer, pay_to, amount, command, request, state,
       transaction_signature, raw_tx, valid_until, job_id, refund_transfer_id, error, failed_on_chain_at,
       created_at, updated_at, x402_version, payment_ref, answer, answer_expires_at, facilitator,
       transfer_log_index, refund_started_at, refund_attempts, refund_fees, needs_operator_at, needs_operator,
       'exact', NULL, NULL
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_next RENAME TO payments;
CREATE INDEX payments_by_agent ON payments (agent_id, created_at);
CREATE INDEX payments_by_job ON payments (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX payments_open ON payments (state) WHERE state IN ('verified', 'settled', 'refund_owed', 'refunding');
CREATE INDEX payments_failed_on_chain ON payments (network, payer, failed_on_chain_at) WHERE failed_on_chain_at IS NOT NULL;
CREATE UNIQUE INDEX payments_by_payer_ref ON payments (payer, payment_ref) WHERE payment_ref IS NOT NULL;
CREATE INDEX payments_answers_to_forget ON payments (answer_expires_at) WHERE answer IS NOT NULL;
CREATE UNIQUE INDEX payments_by_transfer ON payments (network, transaction_signature, transfer_log_index)
    WHERE transfer_log_index IS NOT NULL;
CREATE INDEX payments_refunded ON payments (network, payer, refund_started_at) WHERE refund_started_at IS NOT NULL;
CREATE INDEX payments_served_by_payer ON payments (agent_id, network, payer, command, created_at) WHERE state = 'served';
