-- An agent whose owner opens its free MCP tools to anyone, with no key ([mcp] open).
ALTER TABLE agents ADD COLUMN mcp_open INTEGER NOT NULL DEFAULT 0;
