-- The person's side (issue 14). Keep in step with ../sqlite/0014_events.sql.
--
-- A chat's events (refusal.recorded, approval.requested, approval.resolved,
-- approval.revoked), written in the same transaction as the change they report, read by
-- subscribers as `id > last id` so any process can serve any chat's stream.
CREATE TABLE events (
    id       BIGSERIAL PRIMARY KEY,
    at       BIGINT NOT NULL,
    user_id  TEXT   NOT NULL,
    chat_id  TEXT   NOT NULL,
    kind     TEXT   NOT NULL,
    data     TEXT   NOT NULL
);
CREATE INDEX events_by_chat ON events (user_id, chat_id, id);
CREATE INDEX events_by_time ON events (at);

-- Admin console sessions: only the SHA-256 of the cookie value and of the CSRF token.
CREATE TABLE ui_sessions (
    session_hash  TEXT   PRIMARY KEY,
    csrf_hash     TEXT   NOT NULL,
    token_hash    TEXT   NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);
