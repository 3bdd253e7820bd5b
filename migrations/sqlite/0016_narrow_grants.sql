-- Narrow grants (issue 25). Keep in step with ../postgres/0016_narrow_grants.sql.
--
-- An approval row gains how far it reaches (`scope`), how many connections it still admits
-- (`uses_left`, NULL = unlimited) and the path prefixes it is narrowed to (`paths`, a JSON
-- list read with the row, NULL = the whole host). A `user` row applies to every chat of the
-- user and is stored with chat_id '' (no chat is named ''); a `turn` row names its turn in
-- turn_id ('' otherwise). The primary key takes turn_id in, so a user row, a chat row and a
-- turn row of one host coexist: the proxy lets the widest live one admit. Old rows read as
-- `chat`, unlimited, whole host.
--
-- SQLite cannot change a primary key in place: the table is rebuilt, and its indexes and
-- cache-epoch triggers (migrations 2 and 9) are made again with it.
CREATE TABLE approvals_new (
    user_id     TEXT   NOT NULL,
    chat_id     TEXT   NOT NULL,
    turn_id     TEXT   NOT NULL DEFAULT '',
    kind        TEXT   NOT NULL CHECK (kind IN ('site', 'package')),
    value       TEXT   NOT NULL,
    card_id     TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    access      TEXT   NOT NULL DEFAULT 'full' CHECK (access IN ('full', 'read')),
    scope       TEXT   NOT NULL DEFAULT 'chat' CHECK (scope IN ('turn', 'chat', 'user')),
    uses_left   BIGINT CHECK (uses_left IS NULL OR uses_left >= 0),
    paths       TEXT,
    CHECK ((scope = 'user') = (chat_id = '')),
    CHECK ((scope = 'turn') = (turn_id <> '')),
    PRIMARY KEY (user_id, chat_id, turn_id, kind, value)
);
INSERT INTO approvals_new (user_id, chat_id, kind, value, card_id, created_at, expires_at, access)
    SELECT user_id, chat_id, kind, value, card_id, created_at, expires_at, access FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_new RENAME TO approvals;
CREATE INDEX approvals_by_card ON approvals (card_id);
CREATE INDEX approvals_by_expiry ON approvals (expires_at);

CREATE TRIGGER approvals_deleted_bump AFTER DELETE ON approvals
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER approvals_shortened_bump AFTER UPDATE OF expires_at ON approvals
WHEN NEW.expires_at < OLD.expires_at
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

-- A later card's approval of the same value takes a row over and may narrow it (`read`, path
-- prefixes, counted uses): remembered allows of the old row end. Spending a use changes
-- only uses_left and bumps nothing (counted grants are never remembered).
CREATE TRIGGER approvals_replaced_bump AFTER UPDATE OF card_id ON approvals
WHEN NEW.card_id <> OLD.card_id
BEGIN
    UPDATE cache_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
