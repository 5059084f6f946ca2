-- What an agent's MCP server shows besides its tools (`[mcp]` in its manifest): knowledge
-- as resources, personality as a prompt, the owner's own resources and prompts. JSON;
-- `{}` shows nothing.
ALTER TABLE agents ADD COLUMN mcp_exposed TEXT NOT NULL DEFAULT '{}';
