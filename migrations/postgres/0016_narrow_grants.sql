-- Narrow grants (issue 25). Keep in step with ../sqlite/0016_narrow_grants.sql.
--
-- An approval row gains how far it reaches (`scope`), how many connections it still admits
-- (`uses_left`, NULL = unlimited) and the path prefixes it is narrowed to (`paths`, a JSON
-- list read with the row, NULL = the whole host). A `user` row applies to every chat of the
-- user and is stored with chat_id '' (no chat is named ''); a `turn` row names its turn in
-- turn_id ('' otherwise). The primary key takes turn_id in, so a user row, a chat row and a
-- turn row of one host coexist: the proxy lets the widest live one admit. Old rows read as
-- `chat`, unlimited, whole host.
ALTER TABLE approvals ADD COLUMN turn_id TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN scope TEXT NOT NULL DEFAULT 'chat'
    CHECK (scope IN ('turn', 'chat', 'user'));
ALTER TABLE approvals ADD COLUMN uses_left BIGINT CHECK (uses_left IS NULL OR uses_left >= 0);
ALTER TABLE approvals ADD COLUMN paths TEXT;
ALTER TABLE approvals ADD CHECK ((scope = 'user') = (chat_id = ''));
ALTER TABLE approvals ADD CHECK ((scope = 'turn') = (turn_id <> ''));
ALTER TABLE approvals DROP CONSTRAINT approvals_pkey;
ALTER TABLE approvals ADD PRIMARY KEY (user_id, chat_id, turn_id, kind, value);

-- A later card's approval of the same value takes a row over and may narrow it (`read`, path
-- prefixes, counted uses): remembered allows of the old row end. Spending a use changes
-- only uses_left and bumps nothing (counted grants are never remembered).
CREATE TRIGGER approvals_replaced_bump AFTER UPDATE OF card_id ON approvals
    FOR EACH ROW WHEN (NEW.card_id <> OLD.card_id)
    EXECUTE FUNCTION egressgate_bump_cache_epoch();
