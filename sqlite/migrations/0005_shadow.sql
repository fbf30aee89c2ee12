-- Shadow decisions: what a shadow pack (a candidate pack loaded next to
-- the enforcing one) would have decided for a check. Each is written once,
-- with the enforced record of the check, and never enforced. The table is
-- append-only, like the ledger's, and the triggers below say so to any
-- client of the file.
--
-- Times are Unix nanoseconds, as everywhere in this database.

-- pos is the insertion order: the order decisions are listed in, and what
-- a page's cursor names. record_id is the enforced record; a record has at
-- most one shadow decision per shadow pack. detail is the JSON of the
-- decision's policy_decisions and reasons (ledger.ShadowDetail); the other
-- fields are columns.
CREATE TABLE shadow_decisions (
	pos              INTEGER NOT NULL PRIMARY KEY,
	tenant_id        TEXT    NOT NULL,
	record_id        TEXT    NOT NULL REFERENCES records (record_id),
	decision_key     TEXT    NOT NULL,
	pack             TEXT    NOT NULL,
	pack_hash        TEXT    NOT NULL CHECK (pack_hash <> ''),
	at_ns            INTEGER NOT NULL,
	enforced_outcome TEXT    NOT NULL,
	outcome          TEXT    NOT NULL,
	status           TEXT    NOT NULL,
	detail           BLOB    NOT NULL,
	UNIQUE (tenant_id, record_id, pack_hash)
);

-- ShadowDecisions: a tenant's decisions in insertion order, and those of
-- one shadow pack or one decision key over a time window.
CREATE INDEX shadow_decisions_list ON shadow_decisions (tenant_id, pos);
CREATE INDEX shadow_decisions_pack ON shadow_decisions (tenant_id, pack_hash, at_ns);
CREATE INDEX shadow_decisions_key ON shadow_decisions (tenant_id, decision_key, at_ns);

CREATE TRIGGER shadow_decisions_no_update BEFORE UPDATE ON shadow_decisions
BEGIN SELECT RAISE(ABORT, 'shadow decisions are append-only: UPDATE refused'); END;
CREATE TRIGGER shadow_decisions_no_delete BEFORE DELETE ON shadow_decisions
BEGIN SELECT RAISE(ABORT, 'shadow decisions are append-only: DELETE refused'); END;
CREATE TRIGGER shadow_decisions_no_replace BEFORE INSERT ON shadow_decisions
WHEN EXISTS (SELECT 1 FROM shadow_decisions WHERE tenant_id = NEW.tenant_id AND record_id = NEW.record_id AND pack_hash = NEW.pack_hash)
  OR EXISTS (SELECT 1 FROM shadow_decisions WHERE pos = NEW.pos)
BEGIN SELECT RAISE(ABORT, 'shadow decisions are append-only: the decision exists'); END;
