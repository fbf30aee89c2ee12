-- A decision's story past its receipt: every record of one decision is
-- found by its decision id, and a decision has at most one execution
-- report. Like the ledger's tables, execution_reports is append-only.

CREATE INDEX records_decision_id ON records (tenant_id, decision_id, seq);

-- report_digest is the digest of the report as received (its canonical
-- JSON): the same report again is answered with the first, another one
-- is a conflict.
CREATE TABLE execution_reports (
	tenant_id     TEXT NOT NULL,
	decision_id   TEXT NOT NULL,
	report_digest TEXT NOT NULL,
	record_id     TEXT NOT NULL REFERENCES records (record_id),
	PRIMARY KEY (tenant_id, decision_id)
) WITHOUT ROWID;

CREATE TRIGGER execution_reports_no_update BEFORE UPDATE ON execution_reports
BEGIN SELECT RAISE(ABORT, 'execution reports are append-only: UPDATE refused'); END;
CREATE TRIGGER execution_reports_no_delete BEFORE DELETE ON execution_reports
BEGIN SELECT RAISE(ABORT, 'execution reports are append-only: DELETE refused'); END;
CREATE TRIGGER execution_reports_no_replace BEFORE INSERT ON execution_reports
WHEN EXISTS (SELECT 1 FROM execution_reports WHERE tenant_id = NEW.tenant_id AND decision_id = NEW.decision_id)
BEGIN SELECT RAISE(ABORT, 'execution reports are append-only: the decision has a report'); END;
