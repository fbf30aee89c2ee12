-- Failed scorecards (issue 34): a record whose scorecard failed its
-- spec's pass mark (scorecard_pass; the record lists the failed
-- dimensions in scorecard_failed) is indexed in record_terms under term
-- 'scorecard' with the value 'failed', so GET /v1/records?scorecard=failed
-- reads it through record_terms' key. No record appended before this
-- migration has scorecard_failed (no spec had a pass mark), so nothing is
-- backfilled.
ALTER TABLE record_terms DROP CONSTRAINT record_terms_term_check;
ALTER TABLE record_terms ADD CONSTRAINT record_terms_term_check CHECK (term IN ('policy_decision_id', 'approver', 'refers_to', 'scorecard'));

-- decision_records, as 0024 made it, with one more column:
-- scorecard_failed is true when the record's scorecard failed its spec's
-- pass mark (the seed's "failed-scorecard" records, which its retention
-- rule names; writ deletes no record).
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
	r.doc -> 'replay' || COALESCE((
		SELECT jsonb_build_object('last_status', a.outcome, 'last_replay_record_id', a.record_id, 'last_replayed_at', a.ts)
		FROM writ_about(r.tenant_id, r.record_id) a
		WHERE a.decision_key LIKE 'replay:%'
		LIMIT 1), '{}'::jsonb) AS replay,
	r.doc -> 'audit'            AS audit,
	r.doc                       AS record,
	r.doc -> 'policy_decisions' AS policy_evaluations,
	COALESCE((SELECT jsonb_agg(a.record_id ORDER BY a.seq)
	          FROM writ_about(r.tenant_id, r.record_id) a
	          WHERE a.decision_key NOT LIKE 'replay:%' AND a.decision_key NOT LIKE 'feedback:%'), '[]'::jsonb) AS superseded_by,
	EXISTS (SELECT 1 FROM writ_about(r.tenant_id, r.record_id) a WHERE a.decision_key LIKE 'retraction:%') AS retracted,
	COALESCE((SELECT jsonb_agg(jsonb_build_object('record_id', a.record_id, 'label', a.outcome) ORDER BY a.seq)
	          FROM writ_about(r.tenant_id, r.record_id) a
	          WHERE a.decision_key LIKE 'feedback:%'), '[]'::jsonb) AS feedback,
	r.doc ? 'scorecard_failed'  AS scorecard_failed
FROM records r
WHERE r.decision_key NOT LIKE 'replay:%';
