-- Time marks (ledger/timemarks.go): the running maximum of a tenant's
-- record times along its chain, every ledger.TimeMarkEvery-th seq and at
-- the end of each append. A mark (tenant_id, max_ts, seq) says that every
-- record of the tenant up to seq has ts <= max_ts; max_ts never decreases
-- along seq, so the key finds, in one search, the last mark before a
-- range's start, where the range's walk of the chain begins (issue 38: a
-- day's range at 1,000,000 records walked the chain up to it, 1.35 s).
-- Written with the records, in their transaction, and append-only.
CREATE TABLE record_time_marks (
	tenant_id TEXT    NOT NULL,
	max_ts    INTEGER NOT NULL, -- unix nanoseconds, as records.ts
	seq       INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, max_ts, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES records (tenant_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER record_time_marks_no_update BEFORE UPDATE ON record_time_marks
BEGIN SELECT RAISE(ABORT, 'record time marks are append-only: UPDATE refused'); END;
CREATE TRIGGER record_time_marks_no_delete BEFORE DELETE ON record_time_marks
BEGIN SELECT RAISE(ABORT, 'record time marks are append-only: DELETE refused'); END;

-- The records appended before this migration.
INSERT INTO record_time_marks (tenant_id, max_ts, seq)
SELECT tenant_id, m, seq FROM (
	SELECT tenant_id, seq, max(ts) OVER (PARTITION BY tenant_id ORDER BY seq) AS m,
		seq = max(seq) OVER (PARTITION BY tenant_id) AS last
	FROM records)
WHERE seq % 16 = 0 OR last;
