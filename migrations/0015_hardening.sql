-- Limits against abuse.
-- * Sliding-window rate limits: each window keeps the count of the window before it.
ALTER TABLE rate_usage ADD COLUMN previous INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rate_counters ADD COLUMN minute_previous INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rate_counters ADD COLUMN day_previous INTEGER NOT NULL DEFAULT 0;
-- * Key-value bytes per account: each value's size, summed over the account's agents.
ALTER TABLE plugin_kv ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
UPDATE plugin_kv SET size = LENGTH(value);
-- * The discovery list is cached with agents: a wallet made or removed moves cache_version.
CREATE TRIGGER wallets_inserted AFTER INSERT ON wallets BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER wallets_deleted AFTER DELETE ON wallets BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER wallets_updated AFTER UPDATE OF agent_id, network, address ON wallets
    BEGIN UPDATE cache_version SET version = version + 1; END;
-- * A paid command that keeps failing is paused: its failures in the current window, and
--   while it is open, since when, why, and when its one half-open trial began.
CREATE TABLE command_breakers (
    agent_id     TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    command      TEXT NOT NULL,
    failures     INTEGER NOT NULL,
    window_start INTEGER NOT NULL,
    opened_at    INTEGER,
    trial_at     INTEGER,
    reason       TEXT NOT NULL,
    PRIMARY KEY (agent_id, command)
);
-- * A key may have its owner's name for it, to tell it apart from the others.
ALTER TABLE api_keys ADD COLUMN name TEXT;
