-- Revocation closes what is open: shortening a turn (hiding its chat ends its turns) and
-- removing an administrators' package also bump the cache epoch, so every proxy re-checks its
-- open connections within one poll. Keep in step with ../sqlite/0005_revocation.sql.
CREATE TRIGGER turns_shortened_bump AFTER UPDATE OF expires_at ON turns
    FOR EACH ROW WHEN (NEW.expires_at < OLD.expires_at)
    EXECUTE FUNCTION egressgate_bump_cache_epoch();

CREATE TRIGGER admin_packages_deleted_bump AFTER DELETE ON admin_packages
    FOR EACH STATEMENT EXECUTE FUNCTION egressgate_bump_cache_epoch();
