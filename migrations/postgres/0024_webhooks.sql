-- (PostgreSQL; as ../0024_webhooks.sql.)
-- Signed webhooks: an account's endpoints, the events that happened to it, and one
-- delivery of each event to each endpoint subscribed when it happened.
--
-- An event is written in the transaction of what it reports (a payment settled, a job
-- finished, a key made), once: dedup_key is unique. Its deliveries are written with it, so
-- nothing that happened is lost to a crash. Hosts claim a due delivery by a conditional
-- update with a lease, as jobs are claimed: one host sends it at a time, and a host that
-- dies mid-send leaves it to another once the lease runs out.
CREATE TABLE webhook_endpoints (
    id                   TEXT PRIMARY KEY,
    account_id           TEXT NOT NULL,
    url                  TEXT NOT NULL,
    description          TEXT,
    events               TEXT NOT NULL,           -- event types, comma-separated
    secret               BYTEA NOT NULL,           -- sealed with the master key
    created_at           BIGINT NOT NULL,
    disabled_at          BIGINT,
    disabled_reason      TEXT,
    failing_since        BIGINT,                 -- first failed attempt since the last success
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    last_success_at      BIGINT
);
CREATE INDEX webhook_endpoints_by_account ON webhook_endpoints (account_id);

CREATE TABLE webhook_events (
    id         TEXT PRIMARY KEY,                  -- msg_...: the webhook-id header
    account_id TEXT NOT NULL,
    type       TEXT NOT NULL,
    dedup_key  TEXT NOT NULL UNIQUE,
    body       TEXT NOT NULL,                     -- exactly the bytes sent and signed
    created_at BIGINT NOT NULL
);
CREATE INDEX webhook_events_by_time ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    event_id        TEXT NOT NULL,
    endpoint_id     TEXT NOT NULL,
    account_id      TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'sending', 'succeeded', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claim           TEXT,
    lease_until     BIGINT,
    last_status     BIGINT,
    last_error      TEXT,
    last_latency_ms BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, created_at);

CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL,
    n           BIGINT NOT NULL,
    at          BIGINT NOT NULL,
    status      BIGINT,                          -- the receiver's HTTP status, if it answered
    error       TEXT,
    latency_ms  BIGINT NOT NULL,
    excerpt     TEXT,                             -- the start of its answer
    PRIMARY KEY (delivery_id, n)
);

-- An owner's low-balance alert on an agent's wallet: below this many micro-USDC, one
-- wallet.low_balance event, and another only after the balance came back above.
CREATE TABLE wallet_alerts (
    agent_id   TEXT NOT NULL,
    network    TEXT NOT NULL,
    below      BIGINT NOT NULL,
    low_since  BIGINT,
    checked_at BIGINT,
    PRIMARY KEY (agent_id, network)
);
