-- The card as evidence (issue 25). Keep in step with ../postgres/0015_refusal_evidence.sql.
--
-- What the sandbox really tried, per turn and (host, port, reason, package, method, URL
-- without query): how often, first and last time, and whether any such request carried a
-- body (an upload). '' stands for "not known" in the key columns (a tunnel shows no method
-- or URL; a refusal about a host names no package). Written in the same transaction as the
-- refusal record, at most 16 rows per refusal-record row (store::db::refusals::evidence),
-- deleted with the turn.
CREATE TABLE refusal_evidence (
    turn_id     TEXT   NOT NULL,
    host        TEXT   NOT NULL,
    port        BIGINT NOT NULL,
    reason      TEXT   NOT NULL,
    package     TEXT   NOT NULL DEFAULT '',
    method      TEXT   NOT NULL DEFAULT '',
    url         TEXT   NOT NULL DEFAULT '',
    upload      BIGINT NOT NULL DEFAULT 0,
    count       BIGINT NOT NULL,
    first_seen  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL,
    PRIMARY KEY (turn_id, host, port, reason, package, method, url)
);
