-- Corrections, retractions, feedback and replay results (issue 34): a
-- record that supersedes another, or is about another (a feedback entry,
-- a replay result: outputs.record_id), is indexed under term "refers_to"
-- with the other record's id, so a record's view can list what supersedes
-- it, whether it is retracted, its feedback and its latest replay.
-- SQLite cannot change a CHECK constraint, so record_terms is rebuilt with
-- the new term allowed; its rows are copied as they are.
CREATE TABLE record_terms_new (
	tenant_id TEXT    NOT NULL,
	term      TEXT    NOT NULL CHECK (term IN ('policy_decision_id', 'approver', 'refers_to')),
	value     TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, term, value, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES records (tenant_id, seq)
) WITHOUT ROWID;
INSERT INTO record_terms_new SELECT tenant_id, term, value, seq FROM record_terms;
DROP TABLE record_terms;
ALTER TABLE record_terms_new RENAME TO record_terms;

-- The records appended before this migration that supersede another.
INSERT INTO record_terms (tenant_id, term, value, seq)
SELECT r.tenant_id, 'refers_to', json_extract(CAST(r.raw AS TEXT), '$.supersedes'), r.seq
FROM records r
WHERE coalesce(json_extract(CAST(r.raw AS TEXT), '$.supersedes'), '') <> '';

CREATE TRIGGER record_terms_no_update BEFORE UPDATE ON record_terms
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: UPDATE refused'); END;
CREATE TRIGGER record_terms_no_delete BEFORE DELETE ON record_terms
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: DELETE refused'); END;
CREATE TRIGGER record_terms_no_replace BEFORE INSERT ON record_terms
WHEN EXISTS (SELECT 1 FROM record_terms WHERE tenant_id = NEW.tenant_id AND term = NEW.term AND value = NEW.value AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: the row exists'); END;
