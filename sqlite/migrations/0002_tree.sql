-- The Merkle tree of each tenant's records, as the hashes
-- golang.org/x/mod/sumdb/tlog stores, at tlog's storage indexes; and the
-- signed checkpoints of those trees. Both are append-only.
CREATE TABLE tree_hashes (
  tenant_id TEXT NOT NULL,
  idx       INTEGER NOT NULL,
  hash      BLOB NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (tenant_id, idx)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
  tenant_id TEXT NOT NULL,
  size      INTEGER NOT NULL CHECK (size > 0),
  root      BLOB NOT NULL CHECK (length(root) = 32),
  note      BLOB NOT NULL,
  issued_ns INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, size)
) WITHOUT ROWID;

CREATE TRIGGER tree_hashes_no_update BEFORE UPDATE ON tree_hashes
BEGIN SELECT RAISE(ABORT, 'tree hashes are append-only'); END;
CREATE TRIGGER tree_hashes_no_delete BEFORE DELETE ON tree_hashes
BEGIN SELECT RAISE(ABORT, 'tree hashes are append-only'); END;
CREATE TRIGGER tree_hashes_no_replace BEFORE INSERT ON tree_hashes
WHEN EXISTS (SELECT 1 FROM tree_hashes WHERE tenant_id = NEW.tenant_id AND idx = NEW.idx)
BEGIN SELECT RAISE(ABORT, 'tree hashes are append-only: the hash exists'); END;

CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
CREATE TRIGGER checkpoints_no_replace BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM checkpoints WHERE tenant_id = NEW.tenant_id AND size = NEW.size)
BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only: a checkpoint of this size exists'); END;
