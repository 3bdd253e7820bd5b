-- Cost flat as the data grows (issue 19). Keep in step with ../sqlite/0009_scale_indexes.sql.
--
-- The janitor keeps a turn while an interrupt row names it (purge_turns): this index answers
-- that per turn instead of scanning every interrupt. It also deletes drafts and approvals
-- past their expiry on every pass, which without these indexes reads every row.
CREATE INDEX interrupts_by_turn ON interrupts (turn_id);
CREATE INDEX drafts_by_expiry ON drafts (expires_at);
CREATE INDEX approvals_by_expiry ON approvals (expires_at);
