-- Witnesses' cosignatures on the tenants' checkpoints (C2SP
-- tlog-cosignature): one per tenant, tree size and witness key, the
-- signature line exactly as the witness returned it. Append-only.
CREATE TABLE cosignatures (
  tenant_id   TEXT    NOT NULL,
  size        INTEGER NOT NULL CHECK (size > 0),
  witness     TEXT    NOT NULL CHECK (witness <> ''),
  key_hash    INTEGER NOT NULL CHECK (key_hash >= 0 AND key_hash <= 4294967295),
  line        BLOB    NOT NULL,
  cosigned_ns INTEGER NOT NULL,
  received_ns INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, size, witness, key_hash)
) WITHOUT ROWID;

CREATE INDEX cosignatures_by_witness ON cosignatures (tenant_id, witness, key_hash, size);

CREATE TRIGGER cosignatures_no_update BEFORE UPDATE ON cosignatures
BEGIN SELECT RAISE(ABORT, 'cosignatures are append-only'); END;
CREATE TRIGGER cosignatures_no_delete BEFORE DELETE ON cosignatures
BEGIN SELECT RAISE(ABORT, 'cosignatures are append-only'); END;
