-- Time lows (ledger/timelows.go): the minimum of the record times of each
-- whole, aligned block of a tenant's chain. A low (tenant_id, level, seq,
-- min_ts) says that the records of the tenant in (seq - 16^level, seq]
-- have times of at least min_ts, and one has it; seq is a multiple of
-- 16^level, levels 1 to 6. Newest first with an end (to), the walk back
-- starts at the last record before the end, which ledger.TimeCeiling
-- finds through them, up and down the levels (issue 38: a day in the
-- middle of 1,000,000 records, newest first, walked back from the chain's
-- end, 1.1 s). A block is complete once its last record is appended, so
-- its low is written with that record, in its transaction, and never
-- changes. Append-only.
CREATE TABLE record_time_lows (
	tenant_id TEXT    NOT NULL,
	level     INTEGER NOT NULL CHECK (level BETWEEN 1 AND 6),
	seq       INTEGER NOT NULL,
	min_ts    INTEGER NOT NULL, -- unix nanoseconds, as records.ts
	PRIMARY KEY (tenant_id, level, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES records (tenant_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER record_time_lows_no_update BEFORE UPDATE ON record_time_lows
BEGIN SELECT RAISE(ABORT, 'record time lows are append-only: UPDATE refused'); END;
CREATE TRIGGER record_time_lows_no_delete BEFORE DELETE ON record_time_lows
BEGIN SELECT RAISE(ABORT, 'record time lows are append-only: DELETE refused'); END;

-- The records appended before this migration: a block is complete when
-- its greatest seq is its last (seqs are contiguous).
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts)
SELECT tenant_id, 1, max(seq), min(ts) FROM records GROUP BY tenant_id, (seq - 1) / 16 HAVING max(seq) % 16 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts)
SELECT tenant_id, 2, max(seq), min(min_ts) FROM record_time_lows WHERE level = 1 GROUP BY tenant_id, (seq - 1) / 256 HAVING max(seq) % 256 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts)
SELECT tenant_id, 3, max(seq), min(min_ts) FROM record_time_lows WHERE level = 2 GROUP BY tenant_id, (seq - 1) / 4096 HAVING max(seq) % 4096 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts)
SELECT tenant_id, 4, max(seq), min(min_ts) FROM record_time_lows WHERE level = 3 GROUP BY tenant_id, (seq - 1) / 65536 HAVING max(seq) % 65536 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts)
SELECT tenant_id, 5, max(seq), min(min_ts) FROM record_time_lows WHERE level = 4 GROUP BY tenant_id, (seq - 1) / 1048576 HAVING max(seq) % 1048576 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts)
SELECT tenant_id, 6, max(seq), min(min_ts) FROM record_time_lows WHERE level = 5 GROUP BY tenant_id, (seq - 1) / 16777216 HAVING max(seq) % 16777216 = 0;
