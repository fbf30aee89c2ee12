-- Approval floors: how far the pending approvals' walk may skip. A floor
-- (tenant_id, pos, at_ns) says that every approval request of the tenant
-- at or before pos was decided, or had expired, at at_ns; both last, so
-- it holds at any later time. Listing the pending requests walks
-- approval_requests_list past decided requests to reach pending ones,
-- and without a floor that walk grew with every request ever decided
-- (issue 38: under a mixed load the pending list's p99 rose minute by
-- minute). An append that decides a request of a tenant writes a new
-- floor when the first undecided, unexpired request has moved on, in
-- the append's transaction (the single writer); the walk to it starts
-- at the last floor, so each request is walked past once. Append-only.
CREATE TABLE approval_floors (
	tenant_id TEXT    NOT NULL,
	pos       INTEGER NOT NULL,
	at_ns     INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, pos)
) WITHOUT ROWID;

CREATE TRIGGER approval_floors_no_update BEFORE UPDATE ON approval_floors
BEGIN SELECT RAISE(ABORT, 'approval floors are append-only: UPDATE refused'); END;
CREATE TRIGGER approval_floors_no_delete BEFORE DELETE ON approval_floors
BEGIN SELECT RAISE(ABORT, 'approval floors are append-only: DELETE refused'); END;
