-- An agent's wallet on each network, and every USDC transfer it sends.
CREATE TABLE wallets (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    network    TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    address    TEXT NOT NULL,
    secret     BLOB NOT NULL,    -- sealed private key; associated data agent:<id>:wallet:<network>
    created_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, network)
);

-- A transfer is a row before it is sent; its state only moves forward:
-- pending -> confirmed | failed. Rows are kept when an agent is removed.
CREATE TABLE transfers (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    network     TEXT NOT NULL CHECK (network IN ('solana', 'base')),
    kind        TEXT NOT NULL DEFAULT 'transfer' CHECK (kind IN ('transfer', 'refund')),
    sender      TEXT NOT NULL,
    recipient   TEXT NOT NULL,
    amount      INTEGER NOT NULL CHECK (amount > 0),   -- micro-USDC
    memo        TEXT,                                  -- for reference; never on chain
    state       TEXT NOT NULL CHECK (state IN ('pending', 'confirmed', 'failed')),
    signature   TEXT,             -- transaction signature / hash, set before sending
    raw_tx      TEXT,             -- the signed transaction, to re-send or check after a crash
    valid_until INTEGER,          -- Solana: last block height at which it can land
    error       TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX transfers_by_agent ON transfers (agent_id, created_at);
CREATE INDEX transfers_pending ON transfers (state) WHERE state = 'pending';
