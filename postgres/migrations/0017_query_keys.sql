-- The seed's query keys as filters of Records (issue 34).
-- approval_mode_effective has a column and an index (0001). A record holds
-- any number of policy decisions and approvals, so record_terms keeps one
-- row per (term, value) of a record, as record_subjects does for
-- subjects: term 'policy_decision_id' for each of the record's policy
-- decisions, term 'approver' for each approver of its approvals. It is
-- derived from the sealed record, written in the record's transaction and
-- append-only.
CREATE TABLE record_terms (
	term      text        NOT NULL CHECK (term IN ('policy_decision_id', 'approver')),
	value     text        NOT NULL,
	tenant_id text        NOT NULL,
	seq       bigint      NOT NULL,
	ts        timestamptz NOT NULL,
	PRIMARY KEY (term, value, tenant_id, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES record_ids (tenant_id, seq)
);

-- The records appended before this migration.
INSERT INTO record_terms (term, value, tenant_id, seq, ts)
SELECT DISTINCT 'policy_decision_id', p ->> 'policy_decision_id', r.tenant_id, r.seq, r.ts
FROM records r, jsonb_array_elements(CASE jsonb_typeof(r.doc -> 'policy_decisions') WHEN 'array' THEN r.doc -> 'policy_decisions' ELSE '[]' END) p
WHERE coalesce(p ->> 'policy_decision_id', '') <> '';
INSERT INTO record_terms (term, value, tenant_id, seq, ts)
SELECT DISTINCT 'approver', a ->> 'approver', r.tenant_id, r.seq, r.ts
FROM records r, jsonb_array_elements(CASE jsonb_typeof(r.doc -> 'approvals') WHEN 'array' THEN r.doc -> 'approvals' ELSE '[]' END) a
WHERE coalesce(a ->> 'approver', '') <> '';

CREATE TRIGGER record_terms_append_only BEFORE UPDATE OR DELETE ON record_terms
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER record_terms_no_truncate BEFORE TRUNCATE ON record_terms
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
