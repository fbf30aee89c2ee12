-- The signature of each API key (auth.Sign): the ring key that signed it,
-- when, and the Ed25519 signature of the key's message, which covers the
-- key's id, tenant, subject, roles, secret hash, creation time, signing
-- key and signing time (docs/ledger-format.md §3.5). A key created
-- before this table has no row until `writ keys sign` gives it one; an
-- unsigned key opens nothing. Append-only, as the keys are.
CREATE TABLE api_key_signatures (
	key_id    TEXT    NOT NULL PRIMARY KEY REFERENCES api_keys (key_id),
	signed_by TEXT    NOT NULL,
	signed_ns INTEGER NOT NULL,
	signature BLOB    NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER api_key_signatures_no_update BEFORE UPDATE ON api_key_signatures
BEGIN SELECT RAISE(ABORT, 'api key signatures are append-only: UPDATE refused'); END;
CREATE TRIGGER api_key_signatures_no_delete BEFORE DELETE ON api_key_signatures
BEGIN SELECT RAISE(ABORT, 'api key signatures are append-only: DELETE refused'); END;
CREATE TRIGGER api_key_signatures_no_replace BEFORE INSERT ON api_key_signatures
WHEN EXISTS (SELECT 1 FROM api_key_signatures WHERE key_id = NEW.key_id)
BEGIN SELECT RAISE(ABORT, 'api key signatures are append-only: the key is signed'); END;
