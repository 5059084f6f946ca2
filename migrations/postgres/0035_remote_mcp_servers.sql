-- `agents.mcp_servers`: the manifest's `[[mcp_servers]]` (JSON), the remote MCP servers whose
-- tools the agent's chat may call (docs/mcp.md). A server's credential, when it needs one, is
-- one of the agent's integrations, of kind `mcp_server:NAME`, sealed like its bot's token.
ALTER TABLE agents ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agent_integrations DROP CONSTRAINT agent_integrations_kind_check;
ALTER TABLE agent_integrations ADD CONSTRAINT agent_integrations_kind_check
    CHECK (kind IN ('chatapp', 'social') OR kind LIKE 'mcp\_server:_%' ESCAPE '\');
