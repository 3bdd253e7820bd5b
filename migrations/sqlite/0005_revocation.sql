-- Revocation closes what is open: shortening a turn (hiding its chat ends its turns) and
-- removing an administrators' package also bump the cache epoch, so every proxy re-checks its
-- open connections within one poll. Keep in step with ../postgres/0005_revocation.sql.
CREATE TRIGGER turns_shortened_bump AFTER UPDATE OF expires_at ON turns
WHEN NEW.expires_at < OLD.expires_at
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER admin_packages_deleted_bump AFTER DELETE ON admin_packages
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
