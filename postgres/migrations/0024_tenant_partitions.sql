-- Records are partitioned by tenant, then by month (issue 34; seed 002's
-- partition key, "tenant_id plus time window"). Until this migration they
-- were partitioned by month only, so a tenant's query read every tenant's
-- rows of the months it named.
--
-- records is partitioned by HASH (tenant_id) into 8 tenant partitions,
-- records_h00 … records_h07, each partitioned by RANGE (ts) into monthly
-- partitions records_hNN_pYYYYMM and a default, records_hNN_default. A
-- query that names a tenant (every ledger.Store method does, and so does
-- GET /v1/records) is pruned to that tenant's partition and, when it
-- names a time window, to those months: EXPLAIN shows only them.
--
-- Hash, not list: a list partition per tenant would have to be created
-- when a tenant appends its first record, and creating a partition takes
-- an ACCESS EXCLUSIVE lock on records, which would stop every tenant's
-- appends and reads behind a new tenant's first check; and a thousand
-- tenants would make twelve thousand partitions a year, which every
-- cross-tenant query (an administrator's, on decision_records) would have
-- to plan. Hash partitions are all there before any tenant is, so a new
-- tenant needs no DDL; a tenant shares its partition with about an
-- eighth of the others, whose rows the indexes (all of which name
-- tenant_id) skip. Eight, not more, because every month is a partition in
-- each of them, and each partition costs its nine indexes to create (a
-- new database makes 4 months × 8 when it opens). docs/postgres.md shows the plans.
--
-- The records move into the new table in this migration's transaction,
-- byte for byte (raw, doc and receipt are copied, not re-encoded); every
-- index, trigger, the LZ4 compression and the decision_records view are
-- made again on it. Each month that holds records gets its partition in
-- every tenant partition, so no moved record lands in a default
-- partition; the coming months are created by writ_ensure_partitions when
-- the store opens, as before.

ALTER TABLE records RENAME TO records_unpartitioned_by_tenant;

CREATE TABLE records (
	tenant_id               text        NOT NULL,
	seq                     bigint      NOT NULL CHECK (seq > 0),
	record_id               text        NOT NULL REFERENCES record_ids (record_id),
	decision_id             text        NOT NULL,
	decision_key            text        NOT NULL,
	status                  text        NOT NULL,
	trace_id                text        NOT NULL,
	ts                      timestamptz NOT NULL,
	ts_ns                   bigint      NOT NULL,
	approval_mode_effective text        NOT NULL,
	raw                     bytea COMPRESSION lz4 NOT NULL,
	doc                     jsonb COMPRESSION lz4 NOT NULL,
	receipt                 bytea COMPRESSION lz4 NOT NULL
) PARTITION BY HASH (tenant_id);

-- writ_record_partitions is the number of tenant partitions of records.
-- Changing it means moving every record: it is fixed here.
CREATE FUNCTION writ_record_partitions() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 8';

DO $$
DECLARE
	n     int := writ_record_partitions();
	part  text;
	month timestamp;
BEGIN
	FOR b IN 0 .. n - 1 LOOP
		part := format('records_h%s', to_char(b, 'FM00'));
		EXECUTE format('CREATE TABLE %I PARTITION OF records FOR VALUES WITH (MODULUS %s, REMAINDER %s) PARTITION BY RANGE (ts)', part, n, b);
		EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', part || '_default', part);
		FOR month IN SELECT DISTINCT date_trunc('month', ts AT TIME ZONE 'UTC') FROM records_unpartitioned_by_tenant LOOP
			EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
				part || '_p' || to_char(month, 'YYYYMM'), part,
				to_char(month, 'YYYY-MM-DD') || ' 00:00:00+00',
				to_char(month + interval '1 month', 'YYYY-MM-DD') || ' 00:00:00+00');
		END LOOP;
	END LOOP;
END
$$;

INSERT INTO records SELECT * FROM records_unpartitioned_by_tenant ORDER BY tenant_id, seq;

-- The view and the old table go (DROP is no row operation, so the
-- append-only triggers do not fire; their rows are all in records now).
DROP VIEW decision_records;
DROP TABLE records_unpartitioned_by_tenant;

-- The indexes of 0001, 0006 and 0014, under their names.
CREATE INDEX records_tenant_seq ON records (tenant_id, seq);
CREATE INDEX records_decision_key ON records (decision_key, tenant_id, seq);
CREATE INDEX records_status ON records (status, tenant_id, seq);
CREATE INDEX records_trace_id ON records (trace_id, tenant_id, seq);
CREATE INDEX records_approval_mode ON records (approval_mode_effective, tenant_id, seq);
CREATE INDEX records_ts ON records (tenant_id, ts_ns);
CREATE INDEX records_policy_decisions ON records USING gin ((doc -> 'policy_decisions') jsonb_path_ops);
CREATE INDEX records_decision_id ON records (decision_id, tenant_id, seq);
CREATE INDEX records_decision_key_prefix ON records (tenant_id, decision_key COLLATE "C", seq);

-- Row triggers are cloned onto every partition, at every level; TRUNCATE
-- triggers are not, so each partition gets its own, here and in
-- writ_ensure_partitions.
CREATE TRIGGER records_append_only BEFORE UPDATE OR DELETE ON records
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER records_no_truncate BEFORE TRUNCATE ON records
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
DO $$
DECLARE
	part regclass;
BEGIN
	FOR part IN SELECT relid FROM pg_partition_tree('records') WHERE level > 0 LOOP
		EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse()',
			(SELECT relname FROM pg_class WHERE oid = part) || '_no_truncate', part);
	END LOOP;
END
$$;

-- writ_ensure_partitions creates the monthly partitions of each tenant
-- partition of records (UTC months) from the month of at through the
-- given number of months after it, unless they exist, and returns how
-- many it created. A month some of whose records already sit in a tenant
-- partition's default (written before its partition existed) is left
-- there in that tenant partition: moving rows would mean deleting them.
-- Partitions are created next to records, whatever the search_path.
CREATE OR REPLACE FUNCTION writ_ensure_partitions(at timestamptz, months_ahead int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	nsp     text;
	month   timestamp; -- the first instant of the month, in UTC
	lo      text;
	hi      text;
	parent  text;
	part    text;
	created int := 0;
	busy    boolean;
BEGIN
	SELECT n.nspname INTO nsp FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'records'::regclass;
	FOR b IN 0 .. writ_record_partitions() - 1 LOOP
		parent := format('records_h%s', to_char(b, 'FM00'));
		FOR i IN 0 .. months_ahead LOOP
			-- Month arithmetic on timestamp (not timestamptz) so the session's
			-- time zone and its DST changes play no part.
			month := date_trunc('month', at AT TIME ZONE 'UTC') + make_interval(months => i);
			lo := to_char(month, 'YYYY-MM-DD') || ' 00:00:00+00';
			hi := to_char(month + interval '1 month', 'YYYY-MM-DD') || ' 00:00:00+00';
			part := parent || '_p' || to_char(month, 'YYYYMM');
			CONTINUE WHEN to_regclass(format('%I.%I', nsp, part)) IS NOT NULL;
			EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I WHERE ts >= $1::timestamptz AND ts < $2::timestamptz)', nsp, parent || '_default')
				INTO busy USING lo, hi;
			CONTINUE WHEN busy;
			EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.%I FOR VALUES FROM (%L) TO (%L)', nsp, part, nsp, parent, lo, hi);
			EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I.%I FOR EACH STATEMENT EXECUTE FUNCTION %I.writ_refuse()',
				part || '_no_truncate', nsp, part, nsp);
			created := created + 1;
		END LOOP;
	END LOOP;
	RETURN created;
END
$$;

-- decision_records, as 0019 made it, on the new records.
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
