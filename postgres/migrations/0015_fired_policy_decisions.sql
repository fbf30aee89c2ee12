-- decision_records.policy_decisions holds the policy decisions that fired:
-- those whose verdict is not "allow" (a check that did not fire is
-- recorded with verdict "allow"), in the record's order, so the seed's
-- query 2 ("policy rules producing the most denials") counts the rules
-- that denied, not every rule a denied record evaluated.
-- policy_evaluations keeps the record's whole list.
CREATE OR REPLACE VIEW decision_records AS
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
	COALESCE((SELECT jsonb_agg(pd.value ORDER BY pd.ordinality)
	          FROM jsonb_array_elements(r.doc -> 'policy_decisions') WITH ORDINALITY AS pd
	          WHERE pd.value ->> 'verdict' IS DISTINCT FROM 'allow'), '[]'::jsonb) AS policy_decisions,
	r.doc -> 'approvals'        AS approvals,
	r.doc -> 'controls_active'  AS controls_active,
	r.doc -> 'lineage'          AS lineage,
	r.doc -> 'replay'           AS replay,
	r.doc -> 'audit'            AS audit,
	r.doc                       AS record,
	r.doc -> 'policy_decisions' AS policy_evaluations
FROM records r;
