-- The row GET /readyz rewrites to learn whether the store can commit,
-- after a group commit failed (a full disk, a read-only data directory):
-- reads still succeed then, so only a write tells. fill makes the test
-- write about as large as a batch of checks (256 KiB), so that a disk
-- with room for only a few pages does not pass it. It is not part of the
-- ledger, holds nothing a decision reads, and is the one table writ
-- updates in place.
CREATE TABLE write_probe (
	id    INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	at_ns INTEGER NOT NULL,
	fill  BLOB    NOT NULL
);
