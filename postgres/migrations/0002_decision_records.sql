-- decision_records is the relation operators and analysts query: one row
-- per record, the record's members as columns (jsonb where the record
-- holds structure), across tenants. "timestamp" is the record timestamp at
-- microsecond precision and is the partition key, so time windows prune
-- partitions. It is read-only (a view over records).
CREATE VIEW decision_records AS
SELECT
	r.record_id,
	r.tenant_id,
	r.seq,
	r.decision_id,
	r.decision_key,
	r.status,
	r.ts                       AS "timestamp",
	r.trace_id,
	r.approval_mode_effective,
	r.doc -> 'subject_ids'      AS subject_ids,
	r.doc -> 'actor'            AS actor,
	r.doc -> 'inputs_refs'      AS inputs_refs,
	r.doc -> 'outputs'          AS outputs,
	r.doc -> 'evidence_refs'    AS evidence_refs,
	r.doc -> 'policy_decisions' AS policy_decisions,
	r.doc -> 'approvals'        AS approvals,
	r.doc -> 'controls_active'  AS controls_active,
	r.doc -> 'lineage'          AS lineage,
	r.doc -> 'replay'           AS replay,
	r.doc -> 'audit'            AS audit,
	r.doc                       AS record
FROM records r;
