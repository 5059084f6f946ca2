-- x402 payments. A row is written after verification and before settlement; its
-- identity (Solana: the transaction signature; Base: payer + EIP-3009 nonce) is unique,
-- so a payment can be used once, ever. State moves forward only:
-- verified -> settled -> served | refunded | failed (settlement failed: nothing was taken).
CREATE TABLE payments (
    id                    TEXT PRIMARY KEY,
    identity              TEXT NOT NULL UNIQUE,
    agent_id              TEXT NOT NULL,
    network               TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    payer                 TEXT NOT NULL,
    pay_to                TEXT NOT NULL,
    amount                INTEGER NOT NULL CHECK (amount > 0),   -- micro-USDC
    command               TEXT,                                  -- null: a message
    request               TEXT NOT NULL,                         -- the JSON body, to finish after a crash
    state                 TEXT NOT NULL CHECK (state IN ('verified', 'settled', 'served', 'refunded', 'failed')),
    transaction_signature TEXT,                                  -- the settlement transaction
    raw_tx                TEXT,
    job_id                TEXT,
    refund_transfer_id    TEXT,
    error                 TEXT,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX payments_by_agent ON payments (agent_id, created_at);
CREATE INDEX payments_open ON payments (state) WHERE state IN ('verified', 'settled');
