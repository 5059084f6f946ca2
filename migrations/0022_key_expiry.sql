-- api_keys.expires_at: when a key stops working (Unix ms), if its owner gave it an end.
-- An expired key is refused with its own message; it stays listed, as a revoked one does.
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;

-- The read cache (0012) holds keys with their expiry, and an owner may change it later,
-- so changing it must reach every host's cache too.
DROP TRIGGER api_keys_updated;
CREATE TRIGGER api_keys_updated AFTER UPDATE OF id, account_id, secret_hash, revoked_at, expires_at ON api_keys
    BEGIN UPDATE cache_version SET version = version + 1; END;
