-- Finding the card (issue 25). Keep in step with ../postgres/0017_inbox_links.sql.
--
-- A person's inbox links (POST /v1/users/{user_id}/inbox-link): only the SHA-256 of each
-- link's secret is kept, with its user and expiry. A row stays until purge_at (a day past its
-- expiry), so an expired link is answered "expired" rather than "unknown"; the janitor
-- deletes it then.
CREATE TABLE inbox_links (
    link_id      TEXT   PRIMARY KEY,
    user_id      TEXT   NOT NULL,
    secret_hash  TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    purge_at     BIGINT NOT NULL
);
CREATE INDEX inbox_links_by_purge ON inbox_links (purge_at);

-- The inbox follows one user's events across all their chats.
CREATE INDEX events_by_user ON events (user_id, id);
