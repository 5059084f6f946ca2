-- An agent's third-party accounts (PostgreSQL; as ../0003_integrations.sql).
CREATE TABLE agent_integrations (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('chatapp', 'social')),
    enabled    BOOLEAN NOT NULL DEFAULT TRUE,
    secret     BYTEA NOT NULL,
    public     TEXT NOT NULL DEFAULT '{}',
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (agent_id, kind)
);
