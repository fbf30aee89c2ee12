-- Workflow runs, as append-only events: a run's start, the tool calls
-- writ observed for its steps, and each step attempt with its verdict.
-- A run's state is the fold of its events, so it survives restarts.
CREATE TABLE run_events (
  tenant_id TEXT NOT NULL,
  run_id    TEXT NOT NULL,
  seq       INTEGER NOT NULL CHECK (seq > 0),
  kind      TEXT NOT NULL,
  step_id   TEXT NOT NULL DEFAULT '',
  record_id TEXT NOT NULL DEFAULT '',
  at_ns     INTEGER NOT NULL,
  data      BLOB NOT NULL,
  PRIMARY KEY (tenant_id, run_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER run_events_no_update BEFORE UPDATE ON run_events
BEGIN SELECT RAISE(ABORT, 'run events are append-only'); END;
CREATE TRIGGER run_events_no_delete BEFORE DELETE ON run_events
BEGIN SELECT RAISE(ABORT, 'run events are append-only'); END;
CREATE TRIGGER run_events_no_replace BEFORE INSERT ON run_events
WHEN EXISTS (SELECT 1 FROM run_events WHERE tenant_id = NEW.tenant_id AND run_id = NEW.run_id AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'run events are append-only: the event exists'); END;
