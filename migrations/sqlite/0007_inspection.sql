-- Inspection: an administrators' site can be inspected (the proxy sees the requests inside its
-- TLS) and carry an access level; approval rows carry the level a person granted. Keep in step
-- with ../postgres/0007_inspection.sql. The deployment CA lives in a 0600 file in the data
-- directory on SQLite, so the table below stays empty here (it exists so both dialects have
-- one schema).
ALTER TABLE admin_sites ADD COLUMN inspect BIGINT NOT NULL DEFAULT 0;
ALTER TABLE admin_sites ADD COLUMN access TEXT NOT NULL DEFAULT 'full' CHECK (access IN ('full', 'read'));
-- Launch-time sites opened at `read` only (JSON array of patterns, like `turns.sites`).
ALTER TABLE turns ADD COLUMN read_sites TEXT NOT NULL DEFAULT '[]';
-- A refusal the proxy saw the request of keeps its method.
ALTER TABLE refusals ADD COLUMN method TEXT;
ALTER TABLE approvals ADD COLUMN access TEXT NOT NULL DEFAULT 'full' CHECK (access IN ('full', 'read'));

CREATE TABLE deployment_ca (
    id          BIGINT PRIMARY KEY,
    cert_pem    TEXT   NOT NULL,
    key_pem     TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    -- NULL: the CA that signs; else a rotated-out CA, still served in /v1/ca.pem until then.
    trusted_until BIGINT
);
