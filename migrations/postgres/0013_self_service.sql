-- (PostgreSQL; as ../0013_self_service.sql.)
-- What each API key may do (domain::KeyScope): 'use' the agent endpoints, 'spend' (also move
-- USDC out of the agent's wallets), or 'manage' the account through /v1/account. Keys made
-- before scopes existed keep exactly what they could do then: spend.
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'spend' CHECK (scope IN ('use', 'spend', 'manage'));

-- Which account uploaded which component. Components are stored once by content hash, but an
-- account lists and attaches only its own. Components already attached to an account's
-- commands are that account's.
CREATE TABLE account_plugins (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    hash       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, hash)
);
INSERT INTO account_plugins (account_id, hash, created_at)
    SELECT g.account_id, c.plugin, MIN(g.updated_at)
    FROM commands c JOIN agents g ON g.id = c.agent_id
    WHERE c.plugin IS NOT NULL
    GROUP BY g.account_id, c.plugin;

-- The owner's lists: jobs of an agent, newest first.
CREATE INDEX jobs_by_agent ON jobs(agent_id, created_at);
