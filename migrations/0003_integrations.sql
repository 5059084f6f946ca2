-- An agent's third-party accounts: its chat-app bot, its social account.
CREATE TABLE agent_integrations (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('chatapp', 'social')),
    enabled    INTEGER NOT NULL DEFAULT 1,
    secret     BLOB NOT NULL,                -- sealed JSON (tokens); see secrets.rs
    public     TEXT NOT NULL DEFAULT '{}',   -- JSON that may be shown (bot username, ...)
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, kind)
);
