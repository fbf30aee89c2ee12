-- The classified store: raw values a pack classifies as sensitive
-- (redaction rules with a classification), kept apart from the ledger.
-- The stored request envelope holds only each value's reference, a salted
-- commitment "sha256:<hex>" (docs/ledger-format.md §2.9); this table
-- holds the salt and the value's RFC 8785 JSON. A row is written with the
-- record whose envelope refers to it and is never changed. It is deleted
-- only by an erasure, in the transaction that appends the erasure's
-- record: this is the one table writ deletes from.
CREATE TABLE classified_values (
	tenant_id      TEXT NOT NULL,
	ref            TEXT NOT NULL CHECK (ref LIKE 'sha256:%'),
	rule_id        TEXT NOT NULL,
	classification TEXT NOT NULL,
	salt           BLOB NOT NULL,
	value          BLOB NOT NULL,
	record_id      TEXT NOT NULL,
	PRIMARY KEY (tenant_id, ref)
) WITHOUT ROWID;

CREATE TRIGGER classified_values_no_update BEFORE UPDATE ON classified_values
BEGIN SELECT RAISE(ABORT, 'classified values are never changed: UPDATE refused'); END;

-- Which subjects each value belongs to (the subjects of its record), so an
-- erasure finds a subject's values. Append-only; pos is insertion order.
CREATE TABLE classified_subjects (
	pos        INTEGER NOT NULL PRIMARY KEY,
	tenant_id  TEXT    NOT NULL,
	subject_id TEXT    NOT NULL,
	ref        TEXT    NOT NULL
);
CREATE INDEX classified_subjects_subject ON classified_subjects (tenant_id, subject_id, pos);

CREATE TRIGGER classified_subjects_no_update BEFORE UPDATE ON classified_subjects
BEGIN SELECT RAISE(ABORT, 'classified subjects are append-only: UPDATE refused'); END;
CREATE TRIGGER classified_subjects_no_delete BEFORE DELETE ON classified_subjects
BEGIN SELECT RAISE(ABORT, 'classified subjects are append-only: DELETE refused'); END;
