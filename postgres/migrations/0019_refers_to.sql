-- Corrections, retractions, feedback and replay results (issue 34).
--
-- A record that supersedes another, or is about another (a feedback
-- entry, a replay result: outputs.record_id), is indexed in record_terms
-- under term 'refers_to' with the other record's id.
ALTER TABLE record_terms DROP CONSTRAINT record_terms_term_check;
ALTER TABLE record_terms ADD CONSTRAINT record_terms_term_check CHECK (term IN ('policy_decision_id', 'approver', 'refers_to'));

-- The records appended before this migration that supersede another.
INSERT INTO record_terms (term, value, tenant_id, seq, ts)
SELECT 'refers_to', r.doc ->> 'supersedes', r.tenant_id, r.seq, r.ts
FROM records r
WHERE coalesce(r.doc ->> 'supersedes', '') <> '';

-- writ_about lists the records about one record, newest first: their
-- record id, decision key, outputs.outcome and timestamp.
CREATE FUNCTION writ_about(tenant text, id text)
RETURNS TABLE (record_id text, decision_key text, outcome text, classes jsonb, ts timestamptz, seq bigint)
LANGUAGE sql STABLE AS $$
	SELECT x.record_id, x.decision_key, x.doc -> 'outputs' ->> 'outcome', x.doc -> 'outputs' -> 'classes', x.ts, x.seq
	FROM record_terms t
	JOIN records x ON x.tenant_id = t.tenant_id AND x.seq = t.seq AND x.ts = t.ts
	WHERE t.term = 'refers_to' AND t.value = id AND t.tenant_id = tenant
	ORDER BY t.seq DESC
$$;

-- decision_records holds one row per decision record. A replay result's
-- record (decision key "replay:…") is not a decision record but the
-- record of a replay of one: it is left out, and its status shows on the
-- record it replayed as replay.last_status, so the seed's query 3 ("replay
-- health by pack version") reads each record's latest replay. The replay
-- result records stay in records and in GET /v1/records.
--
-- superseded_by lists the records that name the record in supersedes
-- (corrections, retractions, execution reports, re-checks), oldest
-- first; retracted is true once a retraction names it; feedback lists its
-- feedback entries' records and their labels.
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
	          WHERE a.decision_key LIKE 'feedback:%'), '[]'::jsonb) AS feedback
FROM records r
WHERE r.decision_key NOT LIKE 'replay:%';
