-- rate_counters.lease_until: on a shared database each host takes a share of a key's
-- window ahead of use (services/rate_limit.rs) and hands back what it did not use; this
-- says until when some host may still hold such a share, so a request refused meanwhile
-- waits for it rather than being refused while the limit still has room.
ALTER TABLE rate_counters ADD COLUMN lease_until BIGINT;

-- The keyed path's read cache (store/cache.rs) keeps API keys with their accounts, and
-- agents with their commands, in each serving process. Every write to those tables, by any
-- host or CLI, bumps this one number; hosts check it every `cache_check_ms` and drop what
-- they hold when it moved. Touching a key's last-used time is bookkeeping the cache does
-- not hold, so it bumps nothing.
CREATE TABLE cache_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);
INSERT INTO cache_version (id, version) VALUES (1, 0);

CREATE FUNCTION bump_cache_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cache_version SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER accounts_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version();
CREATE TRIGGER api_keys_changed AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF id, account_id, secret_hash, revoked_at ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version();
CREATE TRIGGER agents_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON agents
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version();
CREATE TRIGGER commands_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON commands
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version();
