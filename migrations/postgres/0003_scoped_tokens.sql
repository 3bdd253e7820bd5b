-- Named API tokens with scopes and an optional expiry, managed through the admin API and CLI
-- (the env tokens in api_tokens stay the simple default). Only the SHA-256 of a token is
-- kept; `scopes` is a space-separated subset of: turns approvals cards:read chats admin.
-- Keep in step with the other dialect's 0003_scoped_tokens.sql.
CREATE TABLE scoped_tokens (
    name        TEXT   PRIMARY KEY,
    token_hash  TEXT   NOT NULL UNIQUE,
    scopes      TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT
);
