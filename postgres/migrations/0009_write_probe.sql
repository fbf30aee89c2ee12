-- The row GET /readyz rewrites to learn whether the store can commit,
-- after a group commit failed (a read-only standby, a database refusing
-- writes): reads still succeed then, so only a write tells. It is not
-- part of the ledger, holds nothing a decision reads, and is the one
-- table writ updates in place.
CREATE TABLE write_probe (
	id    integer NOT NULL PRIMARY KEY CHECK (id = 1),
	at_ns bigint  NOT NULL
);
