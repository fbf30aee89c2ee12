-- A decision's story past its receipt: every record of one decision is
-- found by its decision id, and a decision has at most one execution
-- report. execution_reports is append-only, like the ledger's tables.

CREATE INDEX records_decision_id ON records (decision_id, tenant_id, seq);

-- report_digest is the digest of the report as received (its canonical
-- JSON): the same report again is answered with the first, another one
-- is a conflict. Append reads and inserts reports while it holds the
-- tenant's head lock, so two servers cannot both report one decision;
-- the primary key is the database's own word on it.
CREATE TABLE execution_reports (
	tenant_id     text NOT NULL,
	decision_id   text NOT NULL,
	report_digest text NOT NULL,
	record_id     text NOT NULL REFERENCES record_ids (record_id),
	PRIMARY KEY (tenant_id, decision_id)
);

CREATE TRIGGER execution_reports_append_only BEFORE UPDATE OR DELETE ON execution_reports FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER execution_reports_no_truncate BEFORE TRUNCATE ON execution_reports FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
