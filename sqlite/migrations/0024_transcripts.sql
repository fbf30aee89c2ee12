-- Tool transcripts (issue 32): an execution report's record carries its
-- call's entry in the tool transcript of its run (execution.transcript),
-- and is indexed in record_terms under term "transcript" with the
-- transcript's name, so a run's transcript is read in chain order through
-- record_terms' key (Store.Transcript, Store.TranscriptHead). No record
-- appended before this migration has a transcript entry, so nothing is
-- backfilled. SQLite cannot change a CHECK constraint, so record_terms is
-- rebuilt with the new term allowed; its rows are copied as they are.
CREATE TABLE record_terms_new (
	tenant_id TEXT    NOT NULL,
	term      TEXT    NOT NULL CHECK (term IN ('policy_decision_id', 'approver', 'refers_to', 'scorecard', 'transcript')),
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
