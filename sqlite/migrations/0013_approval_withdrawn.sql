-- A requester may withdraw a pending approval request: a third decision
-- event, "withdrawn", beside "approved" and "denied". SQLite cannot change
-- a CHECK constraint in place, so approval_events is rebuilt with every
-- row it holds, and its index and triggers are made again, counting a
-- withdrawal as the request's one decision. (DROP TABLE's implicit delete
-- fires no trigger; nothing references approval_events.)
CREATE TABLE approval_events_next (
	tenant_id   TEXT    NOT NULL,
	approval_id TEXT    NOT NULL,
	seq         INTEGER NOT NULL CHECK (seq > 0),
	kind        TEXT    NOT NULL CHECK (kind IN ('approved', 'denied', 'withdrawn', 'redeemed')),
	actor       TEXT    NOT NULL,
	reason      TEXT    NOT NULL,
	record_id   TEXT    NOT NULL REFERENCES records (record_id),
	at_ns       INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, approval_id, seq),
	FOREIGN KEY (tenant_id, approval_id) REFERENCES approval_requests (tenant_id, approval_id)
) WITHOUT ROWID;

INSERT INTO approval_events_next (tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns)
	SELECT tenant_id, approval_id, seq, kind, actor, reason, record_id, at_ns FROM approval_events;

DROP TABLE approval_events;
ALTER TABLE approval_events_next RENAME TO approval_events;

CREATE UNIQUE INDEX approval_events_one_decision ON approval_events (tenant_id, approval_id)
	WHERE kind IN ('approved', 'denied', 'withdrawn');

CREATE TRIGGER approval_events_no_update BEFORE UPDATE ON approval_events
BEGIN SELECT RAISE(ABORT, 'approval events are append-only: UPDATE refused'); END;
CREATE TRIGGER approval_events_no_delete BEFORE DELETE ON approval_events
BEGIN SELECT RAISE(ABORT, 'approval events are append-only: DELETE refused'); END;
CREATE TRIGGER approval_events_no_replace BEFORE INSERT ON approval_events
WHEN EXISTS (SELECT 1 FROM approval_events WHERE tenant_id = NEW.tenant_id AND approval_id = NEW.approval_id AND seq = NEW.seq)
  OR (NEW.kind IN ('approved', 'denied', 'withdrawn') AND EXISTS (SELECT 1 FROM approval_events
       WHERE tenant_id = NEW.tenant_id AND approval_id = NEW.approval_id AND kind IN ('approved', 'denied', 'withdrawn')))
BEGIN SELECT RAISE(ABORT, 'approval events are append-only: the event exists'); END;
