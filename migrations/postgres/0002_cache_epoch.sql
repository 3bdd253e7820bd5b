-- A counter every proxy polls: it grows whenever something that was allowed may no longer be
-- (an approval row deleted or shortened, an admin site removed), so cached allow decisions are
-- dropped within one poll interval instead of at the next turn. Maintained by triggers so no
-- code path can forget it. Keep in step with ../sqlite/0002_cache_epoch.sql.
CREATE TABLE cache_epoch (
    id     BIGINT PRIMARY KEY,
    epoch  BIGINT NOT NULL
);
INSERT INTO cache_epoch (id, epoch) VALUES (1, 0);

CREATE FUNCTION egressgate_bump_cache_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER approvals_deleted_bump AFTER DELETE ON approvals
    FOR EACH STATEMENT EXECUTE FUNCTION egressgate_bump_cache_epoch();

CREATE TRIGGER approvals_shortened_bump AFTER UPDATE OF expires_at ON approvals
    FOR EACH ROW WHEN (NEW.expires_at < OLD.expires_at)
    EXECUTE FUNCTION egressgate_bump_cache_epoch();

CREATE TRIGGER admin_sites_deleted_bump AFTER DELETE ON admin_sites
    FOR EACH STATEMENT EXECUTE FUNCTION egressgate_bump_cache_epoch();
