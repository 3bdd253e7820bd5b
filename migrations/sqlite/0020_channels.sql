-- Reaching a person directly (issue 27): contact fields, per-person channel messages and Slack
-- replay protection. Keep in step with ../postgres/0020_channels.sql.
--
-- Slack and e-mail are further consumers of the webhook outbox (0018): the same cursor over
-- the event log, advanced in the same transaction that writes these rows, so one fan-out
-- design serves every channel.

-- How to reach a user outside the API, set by the administrator
-- (PUT /v1/admin/users/{user_id}). A Slack user id maps an interactive click back to exactly
-- one egressgate user, so it is unique when set (NULLs never collide).
CREATE TABLE user_contacts (
    user_id        TEXT   PRIMARY KEY,
    slack_user_id  TEXT   UNIQUE,
    email          TEXT,
    updated_at     BIGINT NOT NULL
);

-- One message per (channel, recipient, event), with the webhook deliveries' bookkeeping:
-- status pending (due at next_try_at; a process that takes it pushes next_try_at past its
-- attempt's limit, so a killed process's message is taken again later), delivered, failed.
-- `recipient` is the channel's address (a Slack user id, `webhook` for the incoming
-- webhook, an e-mail address); `payload` the message as built at fan-out (never a resume
-- secret); `reference` what the channel answered about it (a Slack message's ts, a
-- Message-ID), when it did.
CREATE TABLE channel_deliveries (
    id             TEXT   PRIMARY KEY,
    channel        TEXT   NOT NULL CHECK (channel IN ('slack', 'email')),
    recipient      TEXT   NOT NULL,
    user_id        TEXT   NOT NULL,
    event_id       BIGINT NOT NULL,
    event_type     TEXT   NOT NULL,
    interrupt_id   TEXT,
    payload        TEXT   NOT NULL,
    status         TEXT   NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts       BIGINT NOT NULL DEFAULT 0,
    last_status    BIGINT,
    last_error     TEXT,
    reference      TEXT,
    created_at     BIGINT NOT NULL,
    next_try_at    BIGINT NOT NULL,
    delivered_at   BIGINT,
    UNIQUE (channel, recipient, event_id)
);
CREATE INDEX channel_deliveries_due ON channel_deliveries (status, next_try_at);

-- Slack interaction requests already accepted (the SHA-256 of their signature), kept past the
-- five minutes a timestamp is accepted for: a replay inside the window finds its row, on
-- whichever control process it lands.
CREATE TABLE slack_replays (
    signature_hash TEXT   PRIMARY KEY,
    seen_at        BIGINT NOT NULL
);
CREATE INDEX slack_replays_by_age ON slack_replays (seen_at);
