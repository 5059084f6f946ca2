-- `agents.mcp_servers`: the manifest's `[[mcp_servers]]` (JSON), the remote MCP servers whose
-- tools the agent's chat may call (docs/mcp.md). A server's credential, when it needs one, is
-- one of the agent's integrations, of kind `mcp_server:NAME`, sealed like its bot's token.
ALTER TABLE agents ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';
-- SQLite cannot alter a CHECK constraint: the table is rebuilt with the same columns.
CREATE TABLE agent_integrations_next (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('chatapp', 'social') OR kind LIKE 'mcp\_server:_%' ESCAPE '\'),
    enabled    INTEGER NOT NULL DEFAULT 1,
    secret     BLOB NOT NULL,                -- sealed JSON (tokens); see secrets.rs
    public     TEXT NOT NULL DEFAULT '{}',   -- JSON that may be shown (bot username, ...)
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, kind)
);
INSERT INTO agent_integrations_next (agent_id, kind, enabled, secret, public, updated_at)
    SELECT agent_id, kind, enabled, secret, public, updated_at FROM agent_integrations;
DROP TABLE agent_integrations;
ALTER TABLE agent_integrations_next RENAME TO agent_integrations;
