-- (PostgreSQL; as ../0023_usage.sql.)
-- What each agent did and earned, per UTC hour, added to as the work happens so the
-- owner's dashboards never scan payments. One row per (agent, hour, command, metric, dim):
--   calls      dim '<channel>/<outcome>' (api/succeeded, mcp/failed...); total = run ms
--   duration   dim 'b00'..'b17': runs whose time fell in that bucket (5 ms × 2^k, then more)
--   revenue    dim '<network>/v<x402 version>'; total = micro-USDC settled
--   refunds    dim '<network>'; total = micro-USDC refunded
--   fees       dim 'solana/lamports' or 'base/wei'; total = what the agent's wallet paid
--   offers     dim '<network>' or ''; price lists (402 answers) given
--   chat       dim 'prompt' or 'completion'; n = chats, total = tokens
-- command is '' for what is not one command's (a paid message, chat tokens, fees).
-- Every write adds (n + excluded.n), so hosts and payments write without a lock.
-- Rows stay when the agent is deleted, as its payments do.
CREATE TABLE usage_counters (
    account_id TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    hour       BIGINT NOT NULL,
    command    TEXT NOT NULL,
    metric     TEXT NOT NULL,
    dim        TEXT NOT NULL,
    n          BIGINT NOT NULL,
    total      BIGINT NOT NULL,
    PRIMARY KEY (agent_id, hour, command, metric, dim)
);
CREATE INDEX usage_counters_by_account ON usage_counters (account_id, hour);
