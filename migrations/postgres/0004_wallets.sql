-- An agent's wallets and its transfers (PostgreSQL; as ../0004_wallets.sql).
CREATE TABLE wallets (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    network    TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    address    TEXT NOT NULL,
    secret     BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (agent_id, network)
);

CREATE TABLE transfers (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    network     TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    kind        TEXT NOT NULL DEFAULT 'transfer' CHECK (kind IN ('transfer', 'refund')),
    sender      TEXT NOT NULL,
    recipient   TEXT NOT NULL,
    amount      BIGINT NOT NULL CHECK (amount > 0),
    memo        TEXT,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'confirmed', 'failed')),
    signature   TEXT,
    raw_tx      TEXT,
    valid_until BIGINT,
    error       TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX transfers_by_agent ON transfers (agent_id, created_at);
CREATE INDEX transfers_pending ON transfers (state) WHERE state = 'pending';
