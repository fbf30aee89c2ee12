-- Approval requests and their events, and API keys and their revocations.
--
-- A request is written once, with the record of the check that asked for
-- it; decisions and redemptions are events appended with their own
-- records. A request's state is derived from its events (and the clock),
-- never stored. A key is revoked by appending a revocation. All four
-- tables are append-only: writ_refuse refuses UPDATE, DELETE and TRUNCATE,
-- as on the ledger's tables.
--
-- Unlike records, these tables are not partitioned: they are plain tables
-- keyed by tenant_id (api_keys by its globally unique key id), small next
-- to the records, and every lookup names a tenant and an id. Times are
-- Unix nanoseconds (bigint), so a request's expiry compares with the clock
-- exactly as writ.ApprovalRequest.Apply compares it; timestamptz would
-- keep microseconds only.

-- pos is the insertion order: the order requests are listed in, and what
-- a page's cursor names. Requests are inserted by Append while it holds
-- the tenant's head lock, so a tenant's positions grow in commit order.
-- request is the request's JSON with its derived fields (state, decision,
-- uses, events) left empty, kept as bytes (jsonb cannot hold U+0000); the
-- columns beside it are copies of its fields for lookups and filters.
CREATE TABLE approval_requests (
	pos            bigint  GENERATED ALWAYS AS IDENTITY UNIQUE,
	tenant_id      text    NOT NULL,
	approval_id    text    NOT NULL,
	gate_id        text    NOT NULL,
	decision_key   text    NOT NULL,
	binding_digest text    NOT NULL, -- ledger.BindingDigest of the request's binding
	allowance      bigint  NOT NULL CHECK (allowance > 0),
	record_id      text    NOT NULL, -- the check that asked
	created_ns     bigint  NOT NULL,
	expires_ns     bigint  NOT NULL,
	request        bytea   NOT NULL,
	PRIMARY KEY (tenant_id, approval_id)
);

-- OpenApproval: the newest pending request of a gate and binding.
CREATE INDEX approval_requests_open ON approval_requests (tenant_id, gate_id, binding_digest, created_ns);
-- Approvals: a tenant's requests in insertion order.
CREATE INDEX approval_requests_list ON approval_requests (tenant_id, pos);

-- seq numbers a request's events from 1. record_id is the record appended
-- with the event.
CREATE TABLE approval_events (
	tenant_id   text   NOT NULL,
	approval_id text   NOT NULL,
	seq         bigint NOT NULL CHECK (seq > 0),
	kind        text   NOT NULL CHECK (kind IN ('approved', 'denied', 'redeemed')),
	actor       text   NOT NULL,
	reason      text   NOT NULL,
	record_id   text   NOT NULL REFERENCES record_ids (record_id),
	at_ns       bigint NOT NULL,
	PRIMARY KEY (tenant_id, approval_id, seq),
	FOREIGN KEY (tenant_id, approval_id) REFERENCES approval_requests (tenant_id, approval_id)
);

-- A request is decided once. Append's guard refuses a second decision
-- (under the request's row lock); this index is the database's own word
-- on it.
CREATE UNIQUE INDEX approval_events_one_decision ON approval_events (tenant_id, approval_id)
	WHERE kind IN ('approved', 'denied');

-- roles is a JSON array of role names. secret_hash is the hex SHA-256 of
-- the token's secret, never the secret.
CREATE TABLE api_keys (
	key_id      text   NOT NULL PRIMARY KEY,
	tenant_id   text   NOT NULL,
	subject     text   NOT NULL,
	roles       text   NOT NULL,
	secret_hash text   NOT NULL,
	created_ns  bigint NOT NULL
);

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_ns);

-- A key has at most one revocation: the first. Revoking again appends
-- nothing.
CREATE TABLE api_key_revocations (
	key_id     text   NOT NULL PRIMARY KEY REFERENCES api_keys (key_id),
	revoked_ns bigint NOT NULL
);

DO $$
DECLARE t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['approval_requests', 'approval_events', 'api_keys', 'api_key_revocations'] LOOP
		EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION writ_refuse()', t || '_append_only', t);
		EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse()', t || '_no_truncate', t);
	END LOOP;
END
$$;
