-- Failed scorecards (issue 34): a record whose scorecard failed its
-- spec's pass mark (scorecard_pass; the record lists the failed
-- dimensions in scorecard_failed) is indexed in record_terms under term
-- "scorecard" with the value "failed", so GET /v1/records?scorecard=failed
-- reads it through record_terms' key. No record appended before this
-- migration has scorecard_failed (no spec had a pass mark), so nothing is
-- backfilled. SQLite cannot change a CHECK constraint, so record_terms is
-- rebuilt with the new term allowed; its rows are copied as they are.
CREATE TABLE record_terms_new (
	tenant_id TEXT    NOT NULL,
	term      TEXT    NOT NULL CHECK (term IN ('policy_decision_id', 'approver', 'refers_to', 'scorecard')),
	value     TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, term, value, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES records (tenant_id, seq)
) WITHOUT ROWID;
INSERT INTO record_terms_new SELECT tenant_id, term, value, seq FROM record_terms;
DROP TABLE record_terms;
ALTER TABLE record_terms_new RENAME TO record_terms;

CREATE TRIGGER record_terms_no_update BEFORE UPDATE ON record_terms
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: UPDATE refused'); END;
CREATE TRIGGER record_terms_no_delete BEFORE DELETE ON record_terms
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: DELETE refused'); END;
CREATE TRIGGER record_terms_no_replace BEFORE INSERT ON record_terms
WHEN EXISTS (SELECT 1 FROM record_terms WHERE tenant_id = NEW.tenant_id AND term = NEW.term AND value = NEW.value AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: the row exists'); END;
