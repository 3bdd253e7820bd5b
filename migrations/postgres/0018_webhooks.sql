-- Signed webhooks (issue 27). Keep in step with ../sqlite/0018_webhooks.sql.
--
-- The outbox is the event log itself (0014): every change already appends its event in its
-- own transaction, and appends commit in id order, so one cursor over event ids is enough to
-- find what is new. A control process advances the cursor and, in the same transaction,
-- writes one delivery row per (endpoint, event) the endpoint asked for; deliveries carry their
-- own state from then on (attempts, next try), so they outlive the event log's retention and
-- survive restarts. Slack and e-mail will be further consumers of the same cursor.

-- Endpoints kept by the administrator. The signing secret must be usable for HMAC, so it is
-- sealed (AES-256-GCM under the deployment's seal key), never hashed. `after_event`: the
-- largest event id when the endpoint was added; older events are not its.
CREATE TABLE webhook_endpoints (
    id             TEXT   PRIMARY KEY,
    url            TEXT   NOT NULL,
    events         TEXT   NOT NULL,
    description    TEXT,
    secret_sealed  TEXT   NOT NULL,
    include_link   BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    after_event    BIGINT NOT NULL
);

-- One message per (endpoint, event): `id` is the Standard Webhooks `webhook-id`, the same
-- on every attempt. `payload` is the JSON body as first built (without any resume secret).
-- status: pending (due at next_try_at; a process that takes it pushes next_try_at past its
-- request timeout, so a killed process's delivery is taken again later), delivered, failed.
CREATE TABLE webhook_deliveries (
    id             TEXT   PRIMARY KEY,
    endpoint_id    TEXT   NOT NULL,
    event_id       BIGINT NOT NULL,
    event_type     TEXT   NOT NULL,
    interrupt_id   TEXT,
    payload        TEXT   NOT NULL,
    status         TEXT   NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts       BIGINT NOT NULL DEFAULT 0,
    last_status    BIGINT,
    last_error     TEXT,
    created_at     BIGINT NOT NULL,
    next_try_at    BIGINT NOT NULL,
    delivered_at   BIGINT,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_try_at);

-- The fan-out cursor: the largest event id already turned into deliveries.
CREATE TABLE webhook_cursor (
    id             BIGINT PRIMARY KEY CHECK (id = 1),
    last_event_id  BIGINT NOT NULL
);
INSERT INTO webhook_cursor (id, last_event_id) SELECT 1, COALESCE(MAX(id), 0) FROM events;

-- Cards whose expiry was announced (`approval.expired`), so each is announced once across
-- processes; pruned with the event log.
CREATE TABLE expiry_notices (
    interrupt_id   TEXT   PRIMARY KEY,
    at             BIGINT NOT NULL
);
CREATE INDEX interrupts_by_expiry ON interrupts (expires_at);

-- A card's resume secret, sealed, for endpoints created with include_link: written before the
-- card is registered (so no delivery can be built without it), only while such an endpoint
-- exists, and purged with the card.
CREATE TABLE resume_links (
    interrupt_id   TEXT   PRIMARY KEY,
    sealed         TEXT   NOT NULL,
    purge_at       BIGINT NOT NULL
);
