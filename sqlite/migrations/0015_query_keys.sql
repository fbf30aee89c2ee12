-- The seed's query keys as filters of Records (issue 34): every one is
-- served by an index scoped by tenant that ends in seq, so pages come out
-- of it in chain order.
--
-- approval_mode has a column of records. A record holds any number of
-- policy decisions and approvals, so record_terms keeps one row per
-- (term, value) of a record, as record_subjects does for subjects:
-- term "policy_decision_id" for each of the record's policy decisions,
-- term "approver" for each approver of its approvals. It is derived from
-- the sealed bytes, written in the record's transaction and append-only.
CREATE INDEX records_approval_mode ON records (tenant_id, approval_mode, seq);

CREATE TABLE record_terms (
	tenant_id TEXT    NOT NULL,
	term      TEXT    NOT NULL CHECK (term IN ('policy_decision_id', 'approver')),
	value     TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, term, value, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES records (tenant_id, seq)
) WITHOUT ROWID;

-- The records appended before this migration.
INSERT INTO record_terms (tenant_id, term, value, seq)
SELECT DISTINCT r.tenant_id, 'policy_decision_id', json_extract(p.value, '$.policy_decision_id'), r.seq
FROM records r, json_each(CAST(r.raw AS TEXT), '$.policy_decisions') p
WHERE json_extract(p.value, '$.policy_decision_id') IS NOT NULL;
INSERT INTO record_terms (tenant_id, term, value, seq)
SELECT DISTINCT r.tenant_id, 'approver', json_extract(a.value, '$.approver'), r.seq
FROM records r, json_each(CAST(r.raw AS TEXT), '$.approvals') a
WHERE json_extract(a.value, '$.approver') IS NOT NULL;

CREATE TRIGGER record_terms_no_update BEFORE UPDATE ON record_terms
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: UPDATE refused'); END;
CREATE TRIGGER record_terms_no_delete BEFORE DELETE ON record_terms
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: DELETE refused'); END;
CREATE TRIGGER record_terms_no_replace BEFORE INSERT ON record_terms
WHEN EXISTS (SELECT 1 FROM record_terms WHERE tenant_id = NEW.tenant_id AND term = NEW.term AND value = NEW.value AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'record_terms are append-only: the row exists'); END;
