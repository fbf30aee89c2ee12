-- History aggregates: what each appended decision contributes to the
-- pack's aggregates over the tenant's own decisions (see
-- ledger/history.go). A value is the sum of a group's contributions after
-- a time, read with the index below; records are never scanned. The
-- table is append-only, like the ledger's, and the triggers say so.
--
-- Times are Unix nanoseconds, as everywhere in this database. seq is the
-- chain position of the record that contributed (replay reads a value as
-- of a record with it).
CREATE TABLE history_contributions (
	tenant_id TEXT    NOT NULL,
	aggregate TEXT    NOT NULL,
	group_key TEXT    NOT NULL,
	at_ns     INTEGER NOT NULL,
	amount    REAL    NOT NULL,
	seq       INTEGER NOT NULL,
	record_id TEXT    NOT NULL REFERENCES records (record_id)
);

CREATE INDEX history_contributions_window ON history_contributions (tenant_id, aggregate, group_key, at_ns);

CREATE TRIGGER history_contributions_no_update BEFORE UPDATE ON history_contributions
BEGIN SELECT RAISE(ABORT, 'history contributions are append-only: UPDATE refused'); END;
CREATE TRIGGER history_contributions_no_delete BEFORE DELETE ON history_contributions
BEGIN SELECT RAISE(ABORT, 'history contributions are append-only: DELETE refused'); END;

-- What a decision adds to the aggregates that count executed decisions,
-- kept under its decision id until its execution report says it
-- succeeded; the report's append copies them into history_contributions.
-- usage_dim names the usage dimension a sum of usage.<dimension> adds
-- ('' otherwise): a report with its own usage adds that instead.
-- seq is the chain position of the record that stored them: when several
-- records of one decision did (a resumed decision), the last one counts.
CREATE TABLE history_pending (
	tenant_id   TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	aggregate   TEXT    NOT NULL,
	group_key   TEXT    NOT NULL,
	at_ns       INTEGER NOT NULL,
	amount      REAL    NOT NULL,
	usage_dim   TEXT    NOT NULL DEFAULT '',
	seq         INTEGER NOT NULL,
	record_id   TEXT    NOT NULL REFERENCES records (record_id)
);

CREATE INDEX history_pending_decision ON history_pending (tenant_id, decision_id, seq);

CREATE TRIGGER history_pending_no_update BEFORE UPDATE ON history_pending
BEGIN SELECT RAISE(ABORT, 'history contributions are append-only: UPDATE refused'); END;
CREATE TRIGGER history_pending_no_delete BEFORE DELETE ON history_pending
BEGIN SELECT RAISE(ABORT, 'history contributions are append-only: DELETE refused'); END;
