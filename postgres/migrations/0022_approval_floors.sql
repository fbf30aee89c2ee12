-- Approval floors (as SQLite's migration 0020): how far the pending
-- approvals' walk may skip. A floor (tenant_id, pos, at_ns) says that
-- every approval request of the tenant at or before pos was decided, or
-- had expired, at at_ns; both last, so it holds at any later time.
-- Listing the pending requests walks approval_requests_list past decided
-- requests to reach pending ones, and without a floor that walk grew with
-- every request ever decided (issue 38). An append that decides a request
-- of a tenant writes a new floor when the first undecided, unexpired
-- request has moved on, in the append's transaction, under the tenant's
-- head lock (appends of a tenant are serialized, and a tenant's requests
-- take positions in commit order); the walk to it starts at the last
-- floor, so each request is walked past once. Append-only. The first
-- decision after this migration writes a tenant's first floor.
CREATE TABLE approval_floors (
	tenant_id text   NOT NULL,
	pos       bigint NOT NULL,
	at_ns     bigint NOT NULL,
	PRIMARY KEY (tenant_id, pos)
);

CREATE TRIGGER approval_floors_append_only BEFORE UPDATE OR DELETE ON approval_floors
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER approval_floors_no_truncate BEFORE TRUNCATE ON approval_floors
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
