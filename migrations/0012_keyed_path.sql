-- rate_counters.lease_until: on a shared database each host takes a share of a key's
-- window ahead of use (services/rate_limit.rs) and hands back what it did not use; this
-- says until when some host may still hold such a share, so a request refused meanwhile
-- waits for it rather than being refused while the limit still has room.
ALTER TABLE rate_counters ADD COLUMN lease_until BIGINT;

-- The keyed path's read cache (store/cache.rs) keeps API keys with their accounts, and
-- agents with their commands, in each serving process. Every write to those tables, by any
-- process (a server, the CLI, another host), bumps this one number; servers check it
-- every `cache_check_ms` and drop what they hold when it moved. Touching a key's
-- last-used time is bookkeeping the cache does not hold, so it bumps nothing.
CREATE TABLE cache_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO cache_version (id, version) VALUES (1, 0);

CREATE TRIGGER accounts_inserted AFTER INSERT ON accounts BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER accounts_updated AFTER UPDATE ON accounts BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER accounts_deleted AFTER DELETE ON accounts BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER api_keys_inserted AFTER INSERT ON api_keys BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER api_keys_updated AFTER UPDATE OF id, account_id, secret_hash, revoked_at ON api_keys
    BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER api_keys_deleted AFTER DELETE ON api_keys BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER agents_inserted AFTER INSERT ON agents BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER agents_updated AFTER UPDATE ON agents BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER agents_deleted AFTER DELETE ON agents BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER commands_inserted AFTER INSERT ON commands BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER commands_updated AFTER UPDATE ON commands BEGIN UPDATE cache_version SET version = version + 1; END;
CREATE TRIGGER commands_deleted AFTER DELETE ON commands BEGIN UPDATE cache_version SET version = version + 1; END;
