-- The ledger: hash-chained decision records per tenant, what travels with
-- them (receipts, idempotency claims, blocks, content-addressed blobs), each
-- tenant's chain head, the per-tenant Merkle tree and its signed
-- checkpoints, and workflow run events.
--
-- Everything but heads is append-only, and the triggers at the end make the
-- database itself refuse an UPDATE, DELETE or TRUNCATE. heads is the
-- chain's cursor; a head row may only move forward.

-- writ_refuse aborts the statement that fired it.
CREATE FUNCTION writ_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'writ: % is append-only: % refused', TG_TABLE_NAME, TG_OP
		USING ERRCODE = 'restrict_violation';
END
$$;

-- writ_head_forward lets a chain head move forward only, and never to
-- another tenant.
CREATE FUNCTION writ_head_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.seq <= OLD.seq THEN
		RAISE EXCEPTION 'writ: a chain head only moves forward (tenant %, seq % to %)', OLD.tenant_id, OLD.seq, NEW.seq
			USING ERRCODE = 'restrict_violation';
	END IF;
	RETURN NEW;
END
$$;

-- record_ids names every record once, across tenants, and holds the
-- chain's unique (tenant_id, seq): a unique index on the partitioned
-- records table would have to include its partition key (ts), so it could
-- not say either.
CREATE TABLE record_ids (
	record_id text        NOT NULL PRIMARY KEY,
	tenant_id text        NOT NULL,
	seq       bigint      NOT NULL CHECK (seq > 0),
	ts        timestamptz NOT NULL,
	UNIQUE (tenant_id, seq)
);

-- records holds each record twice: raw, the exact sealed bytes (what the
-- store serves, hashes and proves; never normalised), and doc, the same
-- record as jsonb for queries. ts is the record timestamp truncated to
-- microseconds (the partition key, and "timestamp" in decision_records);
-- ts_ns is the exact timestamp, in unix nanoseconds, which record queries
-- filter on.
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
	raw                     bytea       NOT NULL,
	doc                     jsonb       NOT NULL,
	receipt                 bytea       NOT NULL
) PARTITION BY RANGE (ts);

-- Monthly partitions are created ahead of time by writ_ensure_partitions;
-- a record outside them (an old or far-future timestamp) lands here.
CREATE TABLE records_default PARTITION OF records DEFAULT;

-- Per-tenant filters end in seq, so pages come out of an index in chain
-- order; leading with the filtered column also serves cross-tenant
-- queries on decision_records.
CREATE INDEX records_tenant_seq ON records (tenant_id, seq);
CREATE INDEX records_decision_key ON records (decision_key, tenant_id, seq);
CREATE INDEX records_status ON records (status, tenant_id, seq);
CREATE INDEX records_trace_id ON records (trace_id, tenant_id, seq);
CREATE INDEX records_approval_mode ON records (approval_mode_effective, tenant_id, seq);
CREATE INDEX records_ts ON records (tenant_id, ts_ns);
CREATE INDEX records_policy_decisions ON records USING gin ((doc -> 'policy_decisions') jsonb_path_ops);

CREATE TABLE record_subjects (
	subject_id text        NOT NULL,
	tenant_id  text        NOT NULL,
	seq        bigint      NOT NULL,
	ts         timestamptz NOT NULL,
	PRIMARY KEY (subject_id, tenant_id, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES record_ids (tenant_id, seq)
);

CREATE TABLE idempotency (
	tenant_id   text NOT NULL,
	key         text NOT NULL,
	args_digest text NOT NULL,
	record_id   text NOT NULL REFERENCES record_ids (record_id),
	PRIMARY KEY (tenant_id, key)
);

CREATE TABLE blocks (
	tenant_id    text NOT NULL,
	decision_key text NOT NULL,
	args_digest  text NOT NULL,
	pack_hash    text NOT NULL,
	record_id    text NOT NULL REFERENCES record_ids (record_id),
	PRIMARY KEY (tenant_id, decision_key, args_digest, pack_hash)
);

CREATE TABLE blobs (
	hash text  NOT NULL PRIMARY KEY, -- "sha256:" and the hex SHA-256 of data
	kind text  NOT NULL,
	data bytea NOT NULL
);

-- A head row is created at seq 0 (before the first record) by the first
-- append of a tenant, and locked FOR UPDATE by every append of the tenant:
-- that lock is what keeps a chain linear when several servers append.
CREATE TABLE heads (
	tenant_id text   NOT NULL PRIMARY KEY,
	seq       bigint NOT NULL CHECK (seq >= 0),
	hash      text   NOT NULL
);

CREATE TABLE tree_hashes (
	tenant_id text   NOT NULL,
	idx       bigint NOT NULL CHECK (idx >= 0),
	hash      bytea  NOT NULL CHECK (length(hash) = 32),
	PRIMARY KEY (tenant_id, idx)
);

CREATE TABLE checkpoints (
	tenant_id text   NOT NULL,
	size      bigint NOT NULL CHECK (size > 0),
	root      bytea  NOT NULL CHECK (length(root) = 32),
	note      bytea  NOT NULL,
	issued_ns bigint NOT NULL,
	PRIMARY KEY (tenant_id, size)
);

CREATE TABLE run_events (
	tenant_id text   NOT NULL,
	run_id    text   NOT NULL,
	seq       bigint NOT NULL CHECK (seq > 0),
	kind      text   NOT NULL,
	step_id   text   NOT NULL DEFAULT '',
	record_id text   NOT NULL DEFAULT '',
	at_ns     bigint NOT NULL,
	data      bytea  NOT NULL,
	PRIMARY KEY (tenant_id, run_id, seq)
);

-- Row triggers on records are cloned onto every partition; TRUNCATE
-- triggers are not, so writ_ensure_partitions adds one to each partition
-- it creates (and records_default gets its own here).
DO $$
DECLARE t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['record_ids', 'records', 'record_subjects', 'idempotency', 'blocks', 'blobs',
	                         'tree_hashes', 'checkpoints', 'run_events'] LOOP
		EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION writ_refuse()', t || '_append_only', t);
		EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse()', t || '_no_truncate', t);
	END LOOP;
END
$$;
CREATE TRIGGER records_default_no_truncate BEFORE TRUNCATE ON records_default
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();

CREATE TRIGGER heads_forward_only BEFORE UPDATE ON heads
	FOR EACH ROW EXECUTE FUNCTION writ_head_forward();
CREATE TRIGGER heads_no_delete BEFORE DELETE ON heads
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER heads_no_truncate BEFORE TRUNCATE ON heads
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();

-- writ_ensure_partitions creates the monthly partitions of records (UTC
-- months) from the month of at through the given number of months after
-- it, unless they exist, and returns how many it created. A month some of
-- whose records already sit in records_default (written before its
-- partition existed) is left there: moving rows would mean deleting them.
-- Partitions are created next to records, whatever the search_path.
CREATE FUNCTION writ_ensure_partitions(at timestamptz, months_ahead int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	nsp     text;
	month   timestamp; -- the first instant of the month, in UTC
	lo      text;
	hi      text;
	part    text;
	created int := 0;
	busy    boolean;
BEGIN
	SELECT n.nspname INTO nsp FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'records'::regclass;
	FOR i IN 0 .. months_ahead LOOP
		-- Month arithmetic on timestamp (not timestamptz) so the session's
		-- time zone and its DST changes play no part.
		month := date_trunc('month', at AT TIME ZONE 'UTC') + make_interval(months => i);
		lo := to_char(month, 'YYYY-MM-DD') || ' 00:00:00+00';
		hi := to_char(month + interval '1 month', 'YYYY-MM-DD') || ' 00:00:00+00';
		part := 'records_p' || to_char(month, 'YYYYMM');
		CONTINUE WHEN to_regclass(format('%I.%I', nsp, part)) IS NOT NULL;
		EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.records_default WHERE ts >= $1::timestamptz AND ts < $2::timestamptz)', nsp)
			INTO busy USING lo, hi;
		CONTINUE WHEN busy;
		EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.records FOR VALUES FROM (%L) TO (%L)', nsp, part, nsp, lo, hi);
		EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I.%I FOR EACH STATEMENT EXECUTE FUNCTION %I.writ_refuse()',
			part || '_no_truncate', nsp, part, nsp);
		created := created + 1;
	END LOOP;
	RETURN created;
END
$$;
