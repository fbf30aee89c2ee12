-- Where each API key revocation stands in its tenant's chain: head_seq is
-- the seq of the tenant's chain head when the revocation was stored (0
-- before the tenant's first record). A checkpoint of a tree of size N
-- commits to the tenant's revocations with head_seq < N
-- (docs/ledger-format.md §5.1), so a revocation deleted, moved or
-- backdated behind writ's back no longer matches a signed checkpoint.
-- Revocations stored before this version are placed at their tenant's head
-- now: the first checkpoint of a larger tree commits to them.
ALTER TABLE api_key_revocations ADD COLUMN head_seq INTEGER;
DROP TRIGGER api_key_revocations_no_update;
UPDATE api_key_revocations SET head_seq = coalesce(
	(SELECT h.seq FROM api_keys k JOIN heads h ON h.tenant_id = k.tenant_id WHERE k.key_id = api_key_revocations.key_id), 0);
CREATE TRIGGER api_key_revocations_no_update BEFORE UPDATE ON api_key_revocations
BEGIN SELECT RAISE(ABORT, 'api key revocations are append-only: UPDATE refused'); END;
