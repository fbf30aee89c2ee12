-- Records compress with LZ4 instead of pglz. A record's three large values
-- (raw, doc and receipt, a few KiB each) are TOASTed, and pglz spent about
-- a tenth of the database's CPU on every check compressing them; LZ4 does
-- the same work in a fraction of the time, and decompresses faster for
-- reads. Only newly written values change: stored values keep the method
-- they were written with, and PostgreSQL reads both.
--
-- SET COMPRESSION on a partitioned table applies to partitions created
-- after it, not to those already there, so each existing partition is
-- altered too. Needs PostgreSQL 14 or later, built with LZ4 (the packaged
-- builds are).

ALTER TABLE records
	ALTER COLUMN raw SET COMPRESSION lz4,
	ALTER COLUMN doc SET COMPRESSION lz4,
	ALTER COLUMN receipt SET COMPRESSION lz4;

DO $$
DECLARE
	part regclass;
BEGIN
	FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'records'::regclass LOOP
		EXECUTE format('ALTER TABLE %s ALTER COLUMN raw SET COMPRESSION lz4, ALTER COLUMN doc SET COMPRESSION lz4, ALTER COLUMN receipt SET COMPRESSION lz4', part);
	END LOOP;
END
$$;
