-- Packages enforced at the proxy (issue 18). Keep in step with
-- ../postgres/0008_package_refusals.sql.
--
-- A refusal of reason `package_not_approved` names the package it was about (its canonical
-- spelling, `store::package`), and the record keeps one row per package: the key grows by
-- `package` ('' for refusals about a host). SQLite cannot change a primary key in place, so
-- the table is rebuilt.
CREATE TABLE refusals_v8 (
    turn_id     TEXT   NOT NULL,
    host        TEXT   NOT NULL,
    port        BIGINT NOT NULL,
    reason      TEXT   NOT NULL,
    package     TEXT   NOT NULL DEFAULT '',
    url         TEXT,
    count       BIGINT NOT NULL,
    first_seen  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL,
    shadow      BIGINT NOT NULL DEFAULT 0,
    method      TEXT,
    PRIMARY KEY (turn_id, host, port, reason, package)
);
INSERT INTO refusals_v8 (turn_id, host, port, reason, package, url, count, first_seen, last_seen, shadow, method)
    SELECT turn_id, host, port, reason, '', url, count, first_seen, last_seen, shadow, method FROM refusals;
DROP TABLE refusals;
ALTER TABLE refusals_v8 RENAME TO refusals;
