-- Time lows (ledger/timelows.go; SQLite's migration 0021): the minimum of
-- the record times of each whole, aligned block of a tenant's chain. A
-- low (tenant_id, level, seq, min_ts_ns) says that the records of the
-- tenant in (seq - 16^level, seq] have times of at least min_ts_ns, and
-- one has it; seq is a multiple of 16^level, levels 1 to 6. Newest first
-- with an end (to), the walk back starts at the last record before the
-- end, which writ_time_ceiling finds through them (issue 38: a day in the
-- middle of 1,000,000 records, newest first, walked back from the chain's
-- end, 193 ms). A block is complete once its last record is appended, so
-- its low is written with that record, in its transaction, under the
-- tenant's head lock, and never changes. Append-only.
CREATE TABLE record_time_lows (
	tenant_id text     NOT NULL,
	level     smallint NOT NULL CHECK (level BETWEEN 1 AND 6),
	seq       bigint   NOT NULL,
	min_ts_ns bigint   NOT NULL,
	PRIMARY KEY (tenant_id, level, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES record_ids (tenant_id, seq)
);

-- The records appended before this migration: a block is complete when
-- its greatest seq is its last (seqs are contiguous).
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns)
SELECT tenant_id, 1, max(seq), min(ts_ns) FROM records GROUP BY tenant_id, (seq - 1) / 16 HAVING max(seq) % 16 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns)
SELECT tenant_id, 2, max(seq), min(min_ts_ns) FROM record_time_lows WHERE level = 1 GROUP BY tenant_id, (seq - 1) / 256 HAVING max(seq) % 256 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns)
SELECT tenant_id, 3, max(seq), min(min_ts_ns) FROM record_time_lows WHERE level = 2 GROUP BY tenant_id, (seq - 1) / 4096 HAVING max(seq) % 4096 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns)
SELECT tenant_id, 4, max(seq), min(min_ts_ns) FROM record_time_lows WHERE level = 3 GROUP BY tenant_id, (seq - 1) / 65536 HAVING max(seq) % 65536 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns)
SELECT tenant_id, 5, max(seq), min(min_ts_ns) FROM record_time_lows WHERE level = 4 GROUP BY tenant_id, (seq - 1) / 1048576 HAVING max(seq) % 1048576 = 0;
INSERT INTO record_time_lows (tenant_id, level, seq, min_ts_ns)
SELECT tenant_id, 6, max(seq), min(min_ts_ns) FROM record_time_lows WHERE level = 5 GROUP BY tenant_id, (seq - 1) / 16777216 HAVING max(seq) % 16777216 = 0;

CREATE TRIGGER record_time_lows_append_only BEFORE UPDATE OR DELETE ON record_time_lows
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER record_time_lows_no_truncate BEFORE TRUNCATE ON record_time_lows
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();

-- writ_time_ceiling returns the highest seq of the tenant at or below hi
-- (the head when hi is NULL) of a record whose time is before before_ns,
-- or 0: ledger.TimeCeiling's search, in one round trip. Up from hi through
-- at most 15 items of each level (level 0: the records), then down into
-- the last block whose low is before the time, to its last record before
-- it.
CREATE FUNCTION writ_time_ceiling(tenant text, hi bigint, before_ns bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
	lvl int := 0;
	lo bigint;
	found bigint;
	inner_seq bigint;
BEGIN
	IF hi IS NULL THEN
		SELECT h.seq INTO hi FROM heads h WHERE h.tenant_id = tenant;
		IF hi IS NULL THEN
			RETURN 0;
		END IF;
	END IF;
	WHILE hi > 0 LOOP
		IF lvl < 6 THEN
			lo := hi / (1::bigint << (4 * (lvl + 1))) * (1::bigint << (4 * (lvl + 1)));
		ELSE
			lo := 0;
		END IF;
		IF hi > lo THEN
			found := writ_time_find(tenant, lvl, lo, hi, before_ns);
			IF found > 0 THEN
				FOR l IN REVERSE lvl - 1 .. 0 LOOP
					inner_seq := writ_time_find(tenant, l, found - (1::bigint << (4 * (l + 1))), found, before_ns);
					IF inner_seq = 0 THEN
						RAISE EXCEPTION 'the time low of level % at % is before the time, and nothing in its block is: the time lows are inconsistent', l + 1, found;
					END IF;
					found := inner_seq;
				END LOOP;
				RETURN found;
			END IF;
		END IF;
		hi := lo;
		lvl := lvl + 1;
	END LOOP;
	RETURN 0;
END $$;

-- writ_time_find returns the highest seq in (lo, hi] of the tenant's item
-- of a level (0: a record, by its time; otherwise a low, by its minimum)
-- before before_ns, or 0.
CREATE FUNCTION writ_time_find(tenant text, lvl int, lo bigint, hi bigint, before_ns bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
	s bigint;
BEGIN
	IF lvl = 0 THEN
		SELECT r.seq INTO s FROM records r WHERE r.tenant_id = tenant AND r.seq > lo AND r.seq <= hi AND r.ts_ns < before_ns
			ORDER BY r.seq DESC LIMIT 1;
	ELSE
		SELECT x.seq INTO s FROM record_time_lows x WHERE x.tenant_id = tenant AND x.level = lvl AND x.seq > lo AND x.seq <= hi
			AND x.min_ts_ns < before_ns ORDER BY x.seq DESC LIMIT 1;
	END IF;
	RETURN coalesce(s, 0);
END $$;
