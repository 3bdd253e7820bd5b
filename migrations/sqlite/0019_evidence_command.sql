-- The sandbox's word on who opened a captured connection (issue 25). Keep in step with
-- ../postgres/0019_evidence_command.sql.
--
-- The command (program and first arguments, bounded, printable ASCII) the sandbox launcher
-- reported with a captured connection's CONNECT (`Egress-Command`). It is the sandbox's claim,
-- not the proxy's fact; NULL when none was reported. The first command reported for an
-- evidence row is kept (store::db::refusals::evidence).
ALTER TABLE refusal_evidence ADD COLUMN command TEXT;
