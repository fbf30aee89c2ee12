-- Approval requests and their events, and API keys and their revocations.
--
-- A request is written once, with the record of the check that asked for
-- it; decisions and redemptions are events appended with their own
-- records. A request's state is derived from its events (and the clock),
-- never stored. A key is revoked by appending a revocation. All four
-- tables are append-only, like the ledger's, and the triggers below say
-- so to any client of the file.
--
-- Times are Unix nanoseconds, as everywhere in this database.

-- pos is the insertion order: the order requests are listed in, and what
-- a page's cursor names. request is the request's JSON with its derived
-- fields (state, decision, uses, events) left empty; the columns beside
-- it are copies of its fields for lookups and filters.
CREATE TABLE approval_requests (
	pos            INTEGER NOT NULL PRIMARY KEY,
	tenant_id      TEXT    NOT NULL,
	approval_id    TEXT    NOT NULL,
	gate_id        TEXT    NOT NULL,
	decision_key   TEXT    NOT NULL,
	binding_digest TEXT    NOT NULL, -- ledger.BindingDigest of the request's binding
	allowance      INTEGER NOT NULL CHECK (allowance > 0),
	record_id      TEXT    NOT NULL, -- the check that asked
	created_ns     INTEGER NOT NULL,
	expires_ns     INTEGER NOT NULL,
	request        BLOB    NOT NULL,
	UNIQUE (tenant_id, approval_id)
);

-- OpenApproval: the newest pending request of a gate and binding.
CREATE INDEX approval_requests_open ON approval_requests (tenant_id, gate_id, binding_digest, created_ns);
-- Approvals: a tenant's requests in insertion order.
CREATE INDEX approval_requests_list ON approval_requests (tenant_id, pos);

-- seq numbers a request's events from 1. record_id is the record appended
-- with the event.
CREATE TABLE approval_events (
	tenant_id   TEXT    NOT NULL,
	approval_id TEXT    NOT NULL,
	seq         INTEGER NOT NULL CHECK (seq > 0),
	kind        TEXT    NOT NULL CHECK (kind IN ('approved', 'denied', 'redeemed')),
	actor       TEXT    NOT NULL,
	reason      TEXT    NOT NULL,
	record_id   TEXT    NOT NULL REFERENCES records (record_id),
	at_ns       INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, approval_id, seq),
	FOREIGN KEY (tenant_id, approval_id) REFERENCES approval_requests (tenant_id, approval_id)
) WITHOUT ROWID;

-- A request is decided once. Append's guard refuses a second decision;
-- this index is the database's own word on it.
CREATE UNIQUE INDEX approval_events_one_decision ON approval_events (tenant_id, approval_id)
	WHERE kind IN ('approved', 'denied');

-- roles is a JSON array of role names. secret_hash is the hex SHA-256 of
-- the token's secret, never the secret.
CREATE TABLE api_keys (
	key_id      TEXT    NOT NULL PRIMARY KEY,
	tenant_id   TEXT    NOT NULL,
	subject     TEXT    NOT NULL,
	roles       TEXT    NOT NULL,
	secret_hash TEXT    NOT NULL,
	created_ns  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_ns);

-- A key has at most one revocation: the first. Revoking again appends
-- nothing.
CREATE TABLE api_key_revocations (
	key_id     TEXT    NOT NULL PRIMARY KEY REFERENCES api_keys (key_id),
	revoked_ns INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER approval_requests_no_update BEFORE UPDATE ON approval_requests
BEGIN SELECT RAISE(ABORT, 'approval requests are append-only: UPDATE refused'); END;
CREATE TRIGGER approval_requests_no_delete BEFORE DELETE ON approval_requests
BEGIN SELECT RAISE(ABORT, 'approval requests are append-only: DELETE refused'); END;
CREATE TRIGGER approval_requests_no_replace BEFORE INSERT ON approval_requests
WHEN EXISTS (SELECT 1 FROM approval_requests WHERE tenant_id = NEW.tenant_id AND approval_id = NEW.approval_id)
  OR EXISTS (SELECT 1 FROM approval_requests WHERE pos = NEW.pos)
BEGIN SELECT RAISE(ABORT, 'approval requests are append-only: the request exists'); END;

CREATE TRIGGER approval_events_no_update BEFORE UPDATE ON approval_events
BEGIN SELECT RAISE(ABORT, 'approval events are append-only: UPDATE refused'); END;
CREATE TRIGGER approval_events_no_delete BEFORE DELETE ON approval_events
BEGIN SELECT RAISE(ABORT, 'approval events are append-only: DELETE refused'); END;
-- INSERT OR REPLACE would resolve a conflict on approval_events_one_decision
-- by deleting the first decision, so the trigger refuses a second one too.
CREATE TRIGGER approval_events_no_replace BEFORE INSERT ON approval_events
WHEN EXISTS (SELECT 1 FROM approval_events WHERE tenant_id = NEW.tenant_id AND approval_id = NEW.approval_id AND seq = NEW.seq)
  OR (NEW.kind IN ('approved', 'denied') AND EXISTS (SELECT 1 FROM approval_events
       WHERE tenant_id = NEW.tenant_id AND approval_id = NEW.approval_id AND kind IN ('approved', 'denied')))
BEGIN SELECT RAISE(ABORT, 'approval events are append-only: the event exists'); END;

CREATE TRIGGER api_keys_no_update BEFORE UPDATE ON api_keys
BEGIN SELECT RAISE(ABORT, 'api keys are append-only: UPDATE refused'); END;
CREATE TRIGGER api_keys_no_delete BEFORE DELETE ON api_keys
BEGIN SELECT RAISE(ABORT, 'api keys are append-only: DELETE refused'); END;
CREATE TRIGGER api_keys_no_replace BEFORE INSERT ON api_keys
WHEN EXISTS (SELECT 1 FROM api_keys WHERE key_id = NEW.key_id)
BEGIN SELECT RAISE(ABORT, 'api keys are append-only: the key exists'); END;

CREATE TRIGGER api_key_revocations_no_update BEFORE UPDATE ON api_key_revocations
BEGIN SELECT RAISE(ABORT, 'api key revocations are append-only: UPDATE refused'); END;
CREATE TRIGGER api_key_revocations_no_delete BEFORE DELETE ON api_key_revocations
BEGIN SELECT RAISE(ABORT, 'api key revocations are append-only: DELETE refused'); END;
-- The first revocation stays: a later one is ignored, as RevokeAPIKey
-- promises, even when a client asks to replace it.
CREATE TRIGGER api_key_revocations_first_wins BEFORE INSERT ON api_key_revocations
WHEN EXISTS (SELECT 1 FROM api_key_revocations WHERE key_id = NEW.key_id)
BEGIN SELECT RAISE(IGNORE); END;
