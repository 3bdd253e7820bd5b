-- Packages enforced at the proxy (issue 18). Keep in step with
-- ../sqlite/0008_package_refusals.sql.
--
-- A refusal of reason `package_not_approved` names the package it was about (its canonical
-- spelling, `store::package`), and the record keeps one row per package: the key grows by
-- `package` ('' for refusals about a host).
ALTER TABLE refusals ADD COLUMN package TEXT NOT NULL DEFAULT '';
ALTER TABLE refusals DROP CONSTRAINT refusals_pkey;
ALTER TABLE refusals ADD PRIMARY KEY (turn_id, host, port, reason, package);
