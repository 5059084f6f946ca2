-- x402 payments (PostgreSQL; as ../0005_payments.sql).
CREATE TABLE payments (
    id                    TEXT PRIMARY KEY,
    identity              TEXT NOT NULL UNIQUE,
    agent_id              TEXT NOT NULL,
    network               TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    payer                 TEXT NOT NULL,
    pay_to                TEXT NOT NULL,
    amount                BIGINT NOT NULL CHECK (amount > 0),
    command               TEXT,
    request               TEXT NOT NULL,
    state                 TEXT NOT NULL CONSTRAINT payments_state CHECK (state IN ('verified', 'settled', 'served', 'refunded', 'failed')),
    transaction_signature TEXT,
    raw_tx                TEXT,
    job_id                TEXT,
    refund_transfer_id    TEXT,
    error                 TEXT,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);
CREATE INDEX payments_by_agent ON payments (agent_id, created_at);
CREATE INDEX payments_open ON payments (state) WHERE state IN ('verified', 'settled');
