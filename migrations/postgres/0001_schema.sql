-- egressgate schema, PostgreSQL dialect. Keep in step with ../sqlite/0001_schema.sql (same
-- version numbers, same tables and columns). Times are BIGINT milliseconds since the epoch;
-- booleans are BIGINT 0/1, so one set of statements serves both backends.

-- A chat is keyed by (user_id, chat_id); turn_seq advances with each new turn.
CREATE TABLE chats (
    user_id     TEXT   NOT NULL,
    chat_id     TEXT   NOT NULL,
    turn_seq    BIGINT NOT NULL DEFAULT 0,
    hidden_at   BIGINT,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, chat_id)
);

-- One agent run; the proxy credential's secret is kept only as SHA-256.
CREATE TABLE turns (
    turn_id           TEXT   PRIMARY KEY,
    user_id           TEXT   NOT NULL,
    chat_id           TEXT   NOT NULL,
    seq               BIGINT NOT NULL,
    secret_hash       TEXT   NOT NULL,
    can_ask_human     BIGINT NOT NULL,
    sites             TEXT   NOT NULL,   -- JSON array of launch-time patterns
    packages          TEXT   NOT NULL,   -- JSON array of launch-time packages
    created_at        BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL,
    refusal_overflow  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX turns_by_chat ON turns (user_id, chat_id, seq);
CREATE INDEX turns_by_expiry ON turns (expires_at);

-- What the proxy refused, one row per (turn, host, port, reason).
CREATE TABLE refusals (
    turn_id     TEXT   NOT NULL,
    host        TEXT   NOT NULL,
    port        BIGINT NOT NULL,
    reason      TEXT   NOT NULL,
    url         TEXT,
    count       BIGINT NOT NULL,
    first_seen  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL,
    PRIMARY KEY (turn_id, host, port, reason)
);

-- Allowed traffic summarised per (turn, host).
CREATE TABLE egress (
    turn_id      TEXT   NOT NULL,
    host         TEXT   NOT NULL,
    connections  BIGINT NOT NULL,
    bytes_up     BIGINT NOT NULL,
    bytes_down   BIGINT NOT NULL,
    first_seen   BIGINT NOT NULL,
    last_seen    BIGINT NOT NULL,
    PRIMARY KEY (turn_id, host)
);

-- A person's approval: per chat, stamped with the card that created it, with its own expiry.
CREATE TABLE approvals (
    user_id     TEXT   NOT NULL,
    chat_id     TEXT   NOT NULL,
    kind        TEXT   NOT NULL CHECK (kind IN ('site', 'package')),
    value       TEXT   NOT NULL,
    card_id     TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, chat_id, kind, value)
);
CREATE INDEX approvals_by_card ON approvals (card_id);

-- Administrators' pre-approved lists.
CREATE TABLE admin_sites (
    pattern     TEXT   PRIMARY KEY,
    note        TEXT,
    created_at  BIGINT NOT NULL
);
CREATE TABLE admin_packages (
    name        TEXT   PRIMARY KEY,
    note        TEXT,
    created_at  BIGINT NOT NULL
);

-- Who may approve; users without a row get the configured default.
CREATE TABLE users (
    user_id      TEXT   PRIMARY KEY,
    can_approve  BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

-- API bearer tokens, hashed.
CREATE TABLE api_tokens (
    role        TEXT   PRIMARY KEY CHECK (role IN ('admin', 'runtime')),
    token_hash  TEXT   NOT NULL,
    created_at  BIGINT NOT NULL
);

-- Server-computed cards waiting to be registered as interrupts; single use.
CREATE TABLE drafts (
    draft_id      TEXT   PRIMARY KEY,
    turn_id       TEXT   NOT NULL,
    user_id       TEXT   NOT NULL,
    chat_id       TEXT   NOT NULL,
    card          TEXT   NOT NULL,
    tool_call_id  TEXT,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    used_at       BIGINT
);

-- The pointer record: at most one per chat.
CREATE TABLE interrupts (
    user_id           TEXT   NOT NULL,
    chat_id           TEXT   NOT NULL,
    interrupt_id      TEXT   NOT NULL UNIQUE,
    secret_hash       TEXT   NOT NULL,
    turn_id           TEXT   NOT NULL,
    turn_seq          BIGINT NOT NULL,
    card              TEXT   NOT NULL,
    tool_call_id      TEXT,
    state             TEXT   NOT NULL CHECK (state IN ('pending', 'claimed', 'done', 'expired')),
    snapshot_key      TEXT,
    snapshot_sha256   TEXT,
    first_answer      TEXT,
    first_answer_key  TEXT,
    created_at        BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL,
    purge_at          BIGINT NOT NULL,
    claim_count       BIGINT NOT NULL DEFAULT 0,
    claim_hash        TEXT,
    worker            TEXT,
    lease_expires_at  BIGINT,
    deadline          BIGINT,
    decision          TEXT,
    answer            TEXT,
    answer_key        TEXT,
    rejected_count    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, chat_id)
);
CREATE INDEX interrupts_by_purge ON interrupts (purge_at);

-- Per-user resume concurrency slots; a slot lapses with its lease.
CREATE TABLE resume_slots (
    user_id       TEXT   NOT NULL,
    interrupt_id  TEXT   NOT NULL,
    expires_at    BIGINT NOT NULL,
    PRIMARY KEY (user_id, interrupt_id)
);

-- Blobs (snapshots, large answers) when the blob store follows the database.
CREATE TABLE blobs (
    blob_key    TEXT   PRIMARY KEY,
    data        BYTEA  NOT NULL,
    created_at  BIGINT NOT NULL
);

-- Audit log, written in the same transaction as the change it records.
CREATE TABLE audit (
    id            BIGSERIAL PRIMARY KEY,
    at            BIGINT NOT NULL,
    kind          TEXT   NOT NULL,
    actor         TEXT   NOT NULL,
    user_id       TEXT,
    chat_id       TEXT,
    interrupt_id  TEXT,
    detail        TEXT   NOT NULL
);
CREATE INDEX audit_by_time ON audit (at);
