-- The classified store: raw values a pack classifies as sensitive
-- (redaction rules with a classification), kept apart from the ledger.
-- The stored request envelope holds only each value's reference, a salted
-- commitment "sha256:<hex>" (docs/ledger-format.md §2.9); this table
-- holds the salt and the value's RFC 8785 JSON. A row is written with the
-- record whose envelope refers to it and is never changed. It is deleted
-- only by an erasure, in the transaction that appends the erasure's
-- record: this is the one table writ deletes from. Like the approval
-- tables it is keyed by tenant_id, and every query names a tenant.
CREATE TABLE classified_values (
	tenant_id      text  NOT NULL,
	ref            text  NOT NULL CHECK (ref LIKE 'sha256:%'),
	rule_id        text  NOT NULL,
	classification text  NOT NULL,
	salt           bytea NOT NULL,
	value          bytea NOT NULL,
	record_id      text  NOT NULL,
	PRIMARY KEY (tenant_id, ref)
);

CREATE TRIGGER classified_values_no_update BEFORE UPDATE ON classified_values
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER classified_values_no_truncate BEFORE TRUNCATE ON classified_values
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();

-- Which subjects each value belongs to (the subjects of its record), so an
-- erasure finds a subject's values. Append-only; pos is insertion order.
CREATE TABLE classified_subjects (
	pos        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant_id  text   NOT NULL,
	subject_id text   NOT NULL,
	ref        text   NOT NULL
);
CREATE INDEX classified_subjects_subject ON classified_subjects (tenant_id, subject_id, pos);

CREATE TRIGGER classified_subjects_append_only BEFORE UPDATE OR DELETE ON classified_subjects
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER classified_subjects_no_truncate BEFORE TRUNCATE ON classified_subjects
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
