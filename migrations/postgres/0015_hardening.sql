-- Limits against abuse (PostgreSQL; as ../0015_hardening.sql).
-- * Sliding-window rate limits: each window keeps the count of the window before it.
ALTER TABLE rate_usage ADD COLUMN previous BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rate_counters ADD COLUMN minute_previous BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rate_counters ADD COLUMN day_previous BIGINT NOT NULL DEFAULT 0;
-- * Key-value bytes per account: each value's size, summed over the account's agents.
ALTER TABLE plugin_kv ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
UPDATE plugin_kv SET size = octet_length(value);
-- * The discovery list is cached with agents: a wallet made, moved or removed moves cache_version.
CREATE TRIGGER wallets_changed AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF agent_id, network, address ON wallets
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version();
-- * A paid command that keeps failing is paused: its failures in the current window, and
--   while it is open, since when, why, and when its one half-open trial began.
CREATE TABLE command_breakers (
    agent_id     TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    command      TEXT NOT NULL,
    failures     BIGINT NOT NULL,
    window_start BIGINT NOT NULL,
    opened_at    BIGINT,
    trial_at     BIGINT,
    reason       TEXT NOT NULL,
    PRIMARY KEY (agent_id, command)
);
-- * A key may have its owner's name for it, to tell it apart from the others.
ALTER TABLE api_keys ADD COLUMN name TEXT;
