-- Witnesses' cosignatures on the tenants' checkpoints (C2SP
-- tlog-cosignature): one per tenant, tree size and witness key, the
-- signature line exactly as the witness returned it. Append-only.
CREATE TABLE cosignatures (
	tenant_id   text   NOT NULL,
	size        bigint NOT NULL CHECK (size > 0),
	witness     text   NOT NULL CHECK (witness <> ''),
	key_hash    bigint NOT NULL CHECK (key_hash >= 0 AND key_hash <= 4294967295),
	line        bytea  NOT NULL,
	cosigned_ns bigint NOT NULL,
	received_ns bigint NOT NULL,
	PRIMARY KEY (tenant_id, size, witness, key_hash)
);

CREATE INDEX cosignatures_by_witness ON cosignatures (tenant_id, witness, key_hash, size);

CREATE TRIGGER cosignatures_append_only BEFORE UPDATE OR DELETE ON cosignatures
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER cosignatures_no_truncate BEFORE TRUNCATE ON cosignatures
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
