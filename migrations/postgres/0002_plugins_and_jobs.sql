-- The plugin key-value store and durable jobs (PostgreSQL; as ../0002_plugins_and_jobs.sql).

CREATE TABLE plugin_kv (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BYTEA NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (agent_id, scope, key)
);

CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    agent_id     TEXT NOT NULL,
    command      TEXT NOT NULL,
    origin       TEXT NOT NULL,
    parameters   TEXT NOT NULL,
    raw_text     TEXT,
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    progress     BIGINT,
    response     TEXT,
    format       TEXT,
    artifact_url TEXT,
    error        TEXT,
    code         TEXT,
    created_at   BIGINT NOT NULL,
    started_at   BIGINT,
    finished_at  BIGINT,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE INDEX jobs_by_expiry ON jobs(expires_at);
