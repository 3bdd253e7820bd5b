-- Shadow mode: a refusal row can say the request was let through anyway, and a user can have
-- their own mode (no row: the deployment's `--mode`). Changing a user's mode bumps the cache
-- epoch, so proxies re-read that user's turns within one poll. Keep in step with
-- ../postgres/0006_shadow_mode.sql.
ALTER TABLE refusals ADD COLUMN shadow BIGINT NOT NULL DEFAULT 0;

CREATE TABLE user_modes (
    user_id     TEXT   PRIMARY KEY,
    mode        TEXT   NOT NULL CHECK (mode IN ('enforce', 'shadow')),
    updated_at  BIGINT NOT NULL
);

CREATE TRIGGER user_modes_inserted_bump AFTER INSERT ON user_modes
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER user_modes_updated_bump AFTER UPDATE OF mode ON user_modes
WHEN NEW.mode <> OLD.mode
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
