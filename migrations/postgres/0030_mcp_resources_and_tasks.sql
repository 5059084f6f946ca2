-- What an agent's MCP server shows besides its tools (`[mcp]` in its manifest): knowledge
-- as resources, personality as a prompt, the owner's own resources and prompts. JSON;
-- `{}` shows nothing.
ALTER TABLE agents ADD COLUMN mcp_exposed TEXT NOT NULL DEFAULT '{}';
-- A client's request to stop a running job (an MCP task cancelled): the host running it
-- sees it and stops the plugin run; the job ends failed with code `cancelled`.
ALTER TABLE jobs ADD COLUMN cancel_requested_at BIGINT;
