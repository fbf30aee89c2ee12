-- Shadow decisions: what a shadow pack (a candidate pack loaded next to
-- the enforcing one) would have decided for a check. Each is written once,
-- with the enforced record of the check, and never enforced. The table is
-- append-only: writ_refuse refuses UPDATE, DELETE and TRUNCATE, as on the
-- ledger's tables.
--
-- Unlike records, the table is not partitioned: it is a plain table keyed
-- by tenant_id, like the approval tables, and every query names a tenant.
-- Times are Unix nanoseconds (bigint), so a decision reads back at the
-- nanosecond it was appended with; timestamptz would keep microseconds
-- only.

-- pos is the insertion order: the order decisions are listed in, and what
-- a page's cursor names. Decisions are inserted by Append while it holds
-- the tenant's head lock, so a tenant's positions grow in commit order.
-- record_id is the enforced record; a record has at most one shadow
-- decision per shadow pack. detail is the JSON of the decision's
-- policy_decisions and reasons (ledger.ShadowDetail), kept as bytes (jsonb
-- cannot hold U+0000); the other fields are columns.
CREATE TABLE shadow_decisions (
	pos              bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
	tenant_id        text   NOT NULL,
	record_id        text   NOT NULL REFERENCES record_ids (record_id),
	decision_key     text   NOT NULL,
	pack             text   NOT NULL,
	pack_hash        text   NOT NULL CHECK (pack_hash <> ''),
	at_ns            bigint NOT NULL,
	enforced_outcome text   NOT NULL,
	outcome          text   NOT NULL,
	status           text   NOT NULL,
	detail           bytea  NOT NULL,
	PRIMARY KEY (tenant_id, record_id, pack_hash)
);

-- ShadowDecisions: a tenant's decisions in insertion order, and those of
-- one shadow pack or one decision key over a time window.
CREATE INDEX shadow_decisions_list ON shadow_decisions (tenant_id, pos);
CREATE INDEX shadow_decisions_pack ON shadow_decisions (tenant_id, pack_hash, at_ns);
CREATE INDEX shadow_decisions_key ON shadow_decisions (tenant_id, decision_key, at_ns);

CREATE TRIGGER shadow_decisions_append_only BEFORE UPDATE OR DELETE ON shadow_decisions
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER shadow_decisions_no_truncate BEFORE TRUNCATE ON shadow_decisions
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
