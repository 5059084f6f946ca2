-- The read cache (store/cache.rs) now holds each agent's open breakers with the agent, so
-- that listing its commands needs no database read. A change that opens, closes or alters
-- an open breaker bumps cache_version; a closed breaker counting failures does not.
CREATE TRIGGER command_breakers_inserted AFTER INSERT ON command_breakers
    FOR EACH ROW WHEN (NEW.opened_at IS NOT NULL) EXECUTE FUNCTION bump_cache_version();
CREATE TRIGGER command_breakers_updated AFTER UPDATE ON command_breakers
    FOR EACH ROW WHEN (OLD.opened_at IS NOT NULL OR NEW.opened_at IS NOT NULL)
    EXECUTE FUNCTION bump_cache_version();
CREATE TRIGGER command_breakers_deleted AFTER DELETE ON command_breakers
    FOR EACH ROW WHEN (OLD.opened_at IS NOT NULL) EXECUTE FUNCTION bump_cache_version();
CREATE TRIGGER command_breakers_truncated AFTER TRUNCATE ON command_breakers
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version();
