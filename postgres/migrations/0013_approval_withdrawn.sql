-- A requester may withdraw a pending approval request: a third decision
-- event, "withdrawn", beside "approved" and "denied". The kind's check and
-- the one-decision index now count it; no row changes.
ALTER TABLE approval_events DROP CONSTRAINT approval_events_kind_check;
ALTER TABLE approval_events ADD CONSTRAINT approval_events_kind_check
	CHECK (kind IN ('approved', 'denied', 'withdrawn', 'redeemed'));

DROP INDEX approval_events_one_decision;
CREATE UNIQUE INDEX approval_events_one_decision ON approval_events (tenant_id, approval_id)
	WHERE kind IN ('approved', 'denied', 'withdrawn');
