-- History aggregates: what each appended decision contributes to the
-- pack's aggregates over the tenant's own decisions (see
-- ledger/history.go). A value is the sum of a group's contributions after
-- a time, read with the index below; records are never scanned. Rows are
-- inserted by Append while it holds the tenant's head lock, which is what
-- makes a value read in that transaction current across servers. The
-- table is append-only: writ_refuse refuses UPDATE, DELETE and TRUNCATE.
--
-- Times are Unix nanoseconds (bigint). seq is the chain position of the
-- record that contributed (replay reads a value as of a record with it).
CREATE TABLE history_contributions (
	tenant_id text             NOT NULL,
	aggregate text             NOT NULL,
	group_key text             NOT NULL,
	at_ns     bigint           NOT NULL,
	amount    double precision NOT NULL,
	seq       bigint           NOT NULL,
	record_id text             NOT NULL REFERENCES record_ids (record_id)
);

CREATE INDEX history_contributions_window ON history_contributions (tenant_id, aggregate, group_key, at_ns) INCLUDE (amount, seq);

CREATE TRIGGER history_contributions_append_only BEFORE UPDATE OR DELETE ON history_contributions
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER history_contributions_no_truncate BEFORE TRUNCATE ON history_contributions
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();

-- What a decision adds to the aggregates that count executed decisions,
-- kept under its decision id until its execution report says it
-- succeeded; the report's append copies them into history_contributions.
-- usage_dim names the usage dimension a sum of usage.<dimension> adds
-- ('' otherwise): a report with its own usage adds that instead.
-- seq is the chain position of the record that stored them: when several
-- records of one decision did (a resumed decision), the last one counts.
CREATE TABLE history_pending (
	tenant_id   text             NOT NULL,
	decision_id text             NOT NULL,
	aggregate   text             NOT NULL,
	group_key   text             NOT NULL,
	at_ns       bigint           NOT NULL,
	amount      double precision NOT NULL,
	usage_dim   text             NOT NULL DEFAULT '',
	seq         bigint           NOT NULL,
	record_id   text             NOT NULL REFERENCES record_ids (record_id)
);

CREATE INDEX history_pending_decision ON history_pending (tenant_id, decision_id, seq);

CREATE TRIGGER history_pending_append_only BEFORE UPDATE OR DELETE ON history_pending
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER history_pending_no_truncate BEFORE TRUNCATE ON history_pending
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
