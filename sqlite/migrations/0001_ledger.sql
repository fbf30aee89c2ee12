-- The ledger: hash-chained decision records per tenant, what travels with
-- them (receipts, idempotency claims, blocks, content-addressed blobs) and
-- each tenant's chain head.
--
-- Everything but heads is append-only, and the triggers below make the
-- database itself refuse to forget that: an UPDATE or DELETE aborts. heads
-- is the chain's cursor; it may only move forward.
--
-- INSERT OR REPLACE deletes the row it replaces without firing DELETE
-- triggers (unless a connection turns recursive_triggers on), so each
-- table also has a BEFORE INSERT trigger, which fires before conflict
-- resolution: inserting an existing key aborts, or, for the
-- insert-if-absent tables (blocks, blobs), does nothing.

CREATE TABLE records (
	tenant_id     TEXT    NOT NULL,
	seq           INTEGER NOT NULL CHECK (seq > 0),
	record_id     TEXT    NOT NULL UNIQUE,
	decision_id   TEXT    NOT NULL,
	decision_key  TEXT    NOT NULL,
	status        TEXT    NOT NULL,
	trace_id      TEXT    NOT NULL,
	ts            INTEGER NOT NULL, -- record timestamp, unix nanoseconds
	approval_mode TEXT    NOT NULL,
	raw           BLOB    NOT NULL, -- the sealed bytes, exactly as sealed
	receipt       BLOB    NOT NULL, -- the receipt answered with the record
	PRIMARY KEY (tenant_id, seq)
);

-- Every query filter is scoped by tenant and ends in seq, so pages come out
-- of the index in chain order.
CREATE INDEX records_decision_key ON records (tenant_id, decision_key, seq);
CREATE INDEX records_status ON records (tenant_id, status, seq);
CREATE INDEX records_trace_id ON records (tenant_id, trace_id, seq);
CREATE INDEX records_ts ON records (tenant_id, ts);

CREATE TABLE record_subjects (
	tenant_id  TEXT    NOT NULL,
	subject_id TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, subject_id, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES records (tenant_id, seq)
) WITHOUT ROWID;

CREATE TABLE idempotency (
	tenant_id   TEXT NOT NULL,
	key         TEXT NOT NULL,
	args_digest TEXT NOT NULL,
	record_id   TEXT NOT NULL REFERENCES records (record_id),
	PRIMARY KEY (tenant_id, key)
) WITHOUT ROWID;

CREATE TABLE blocks (
	tenant_id    TEXT NOT NULL,
	decision_key TEXT NOT NULL,
	args_digest  TEXT NOT NULL,
	pack_hash    TEXT NOT NULL,
	record_id    TEXT NOT NULL REFERENCES records (record_id),
	PRIMARY KEY (tenant_id, decision_key, args_digest, pack_hash)
) WITHOUT ROWID;

CREATE TABLE blobs (
	hash TEXT NOT NULL PRIMARY KEY, -- "sha256:" and the hex SHA-256 of data
	kind TEXT NOT NULL,
	data BLOB NOT NULL
);

CREATE TABLE heads (
	tenant_id TEXT    NOT NULL PRIMARY KEY,
	seq       INTEGER NOT NULL CHECK (seq > 0),
	hash      TEXT    NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'records are append-only: UPDATE refused'); END;
CREATE TRIGGER records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'records are append-only: DELETE refused'); END;

CREATE TRIGGER record_subjects_no_update BEFORE UPDATE ON record_subjects
BEGIN SELECT RAISE(ABORT, 'record_subjects are append-only: UPDATE refused'); END;
CREATE TRIGGER record_subjects_no_delete BEFORE DELETE ON record_subjects
BEGIN SELECT RAISE(ABORT, 'record_subjects are append-only: DELETE refused'); END;

CREATE TRIGGER idempotency_no_update BEFORE UPDATE ON idempotency
BEGIN SELECT RAISE(ABORT, 'idempotency claims are append-only: UPDATE refused'); END;
CREATE TRIGGER idempotency_no_delete BEFORE DELETE ON idempotency
BEGIN SELECT RAISE(ABORT, 'idempotency claims are append-only: DELETE refused'); END;

CREATE TRIGGER blocks_no_update BEFORE UPDATE ON blocks
BEGIN SELECT RAISE(ABORT, 'blocks are append-only: UPDATE refused'); END;
CREATE TRIGGER blocks_no_delete BEFORE DELETE ON blocks
BEGIN SELECT RAISE(ABORT, 'blocks are append-only: DELETE refused'); END;

CREATE TRIGGER blobs_no_update BEFORE UPDATE ON blobs
BEGIN SELECT RAISE(ABORT, 'blobs are append-only: UPDATE refused'); END;
CREATE TRIGGER blobs_no_delete BEFORE DELETE ON blobs
BEGIN SELECT RAISE(ABORT, 'blobs are append-only: DELETE refused'); END;

CREATE TRIGGER records_no_replace BEFORE INSERT ON records
WHEN EXISTS (SELECT 1 FROM records WHERE tenant_id = NEW.tenant_id AND seq = NEW.seq)
  OR EXISTS (SELECT 1 FROM records WHERE record_id = NEW.record_id)
BEGIN SELECT RAISE(ABORT, 'records are append-only: the record exists'); END;

CREATE TRIGGER record_subjects_no_replace BEFORE INSERT ON record_subjects
WHEN EXISTS (SELECT 1 FROM record_subjects WHERE tenant_id = NEW.tenant_id AND subject_id = NEW.subject_id AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'record_subjects are append-only: the row exists'); END;

CREATE TRIGGER idempotency_no_replace BEFORE INSERT ON idempotency
WHEN EXISTS (SELECT 1 FROM idempotency WHERE tenant_id = NEW.tenant_id AND key = NEW.key)
BEGIN SELECT RAISE(ABORT, 'idempotency claims are append-only: the key is claimed'); END;

CREATE TRIGGER blocks_first_wins BEFORE INSERT ON blocks
WHEN EXISTS (SELECT 1 FROM blocks WHERE tenant_id = NEW.tenant_id AND decision_key = NEW.decision_key
                                    AND args_digest = NEW.args_digest AND pack_hash = NEW.pack_hash)
BEGIN SELECT RAISE(IGNORE); END;

CREATE TRIGGER blobs_first_wins BEFORE INSERT ON blobs
WHEN EXISTS (SELECT 1 FROM blobs WHERE hash = NEW.hash)
BEGIN SELECT RAISE(IGNORE); END;

-- The upsert that advances a head runs this trigger too, before its
-- DO UPDATE, so it may only refuse a move that is not forward.
CREATE TRIGGER heads_no_replace_backward BEFORE INSERT ON heads
WHEN EXISTS (SELECT 1 FROM heads WHERE tenant_id = NEW.tenant_id AND seq >= NEW.seq)
BEGIN SELECT RAISE(ABORT, 'a chain head only moves forward'); END;

CREATE TRIGGER heads_forward_only BEFORE UPDATE ON heads
WHEN NEW.seq <= OLD.seq OR NEW.tenant_id IS NOT OLD.tenant_id
BEGIN SELECT RAISE(ABORT, 'a chain head only moves forward'); END;
CREATE TRIGGER heads_no_delete BEFORE DELETE ON heads
BEGIN SELECT RAISE(ABORT, 'chain heads are never deleted'); END;
