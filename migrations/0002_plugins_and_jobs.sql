-- The plugin key-value store and durable jobs.

-- One namespace per agent and plugin (the plugin's manifest name).
CREATE TABLE plugin_kv (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BLOB NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, scope, key)
);

-- A long-running command run. It is a row before the work starts; `queued` has not
-- started, `running` has (a restart fails it rather than run its side effects twice).
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,          -- 128 random bits, hex: the status address
    agent_id     TEXT NOT NULL,
    command      TEXT NOT NULL,
    origin       TEXT NOT NULL,
    parameters   TEXT NOT NULL,             -- JSON object, as validated
    raw_text     TEXT,
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    progress     INTEGER,
    response     TEXT,
    format       TEXT,
    artifact_url TEXT,
    error        TEXT,
    code         TEXT,
    created_at   INTEGER NOT NULL,
    started_at   INTEGER,
    finished_at  INTEGER,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE INDEX jobs_by_expiry ON jobs(expires_at);
