-- Accounts, API keys, agents and their commands, rate-limit usage (PostgreSQL; the same
-- schema as ../0001_init.sql). Times are Unix milliseconds (UTC); money is integer
-- micro-USDC; lists are JSON text.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    plan        TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'enterprise')),
    rpm         BIGINT,             -- custom limits (enterprise); NULL = the plan's
    rpd         BIGINT,
    created_at  BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,  -- the public part of the key, shown in lists
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    secret_hash  BYTEA NOT NULL,    -- SHA-256 of the secret part; the secret itself is never stored
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX api_keys_by_account ON api_keys(account_id);

CREATE TABLE agents (
    id                 TEXT PRIMARY KEY,
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    username           TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL,
    personality        TEXT NOT NULL DEFAULT '',
    knowledge          TEXT NOT NULL DEFAULT '[]',
    x402_enabled       BOOLEAN NOT NULL DEFAULT FALSE,
    x402_default_price BIGINT,
    x402_networks      TEXT NOT NULL DEFAULT '[]',
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
CREATE INDEX agents_by_account ON agents(account_id);

CREATE TABLE commands (
    id              TEXT PRIMARY KEY,
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    position        BIGINT NOT NULL,    -- order in the manifest
    description     TEXT NOT NULL DEFAULT '',
    handler_type    TEXT NOT NULL,
    parameters      TEXT NOT NULL DEFAULT '[]',
    response_format TEXT NOT NULL DEFAULT 'text',
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    integrations    TEXT NOT NULL DEFAULT '[]',
    price           BIGINT,             -- x402 price; NULL = the agent's default
    config          TEXT NOT NULL DEFAULT '{}',
    plugin          TEXT,
    allowed_hosts   TEXT NOT NULL DEFAULT '[]',
    long_running    BOOLEAN NOT NULL DEFAULT FALSE,
    timeout_ms      BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    UNIQUE (agent_id, name)
);

-- Rate-limit counters, saved so that a restart does not hand out a fresh daily quota.
CREATE TABLE rate_usage (
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    "window"     TEXT NOT NULL CHECK ("window" IN ('minute', 'day')),
    window_start BIGINT NOT NULL,
    count        BIGINT NOT NULL,
    PRIMARY KEY (account_id, "window")
);
