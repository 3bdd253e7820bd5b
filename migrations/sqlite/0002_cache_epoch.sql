-- A counter every proxy polls: it grows whenever something that was allowed may no longer be
-- (an approval row deleted or shortened, an admin site removed), so cached allow decisions are
-- dropped within one poll interval instead of at the next turn. Maintained by triggers so no
-- code path can forget it. Keep in step with ../postgres/0002_cache_epoch.sql.
CREATE TABLE cache_epoch (
    id     BIGINT PRIMARY KEY,
    epoch  BIGINT NOT NULL
);
INSERT INTO cache_epoch (id, epoch) VALUES (1, 0);

CREATE TRIGGER approvals_deleted_bump AFTER DELETE ON approvals
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER approvals_shortened_bump AFTER UPDATE OF expires_at ON approvals
WHEN NEW.expires_at < OLD.expires_at
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER admin_sites_deleted_bump AFTER DELETE ON admin_sites
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
