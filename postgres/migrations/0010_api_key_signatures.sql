-- The signature of each API key (auth.Sign): the ring key that signed it,
-- when, and the Ed25519 signature of the key's message, which covers the
-- key's id, tenant, subject, roles, secret hash, creation time, signing
-- key and signing time (docs/ledger-format.md §3.5). A key created
-- before this table has no row until `writ keys sign` gives it one; an
-- unsigned key opens nothing. Append-only, as the keys are.
CREATE TABLE api_key_signatures (
	key_id    text   NOT NULL PRIMARY KEY REFERENCES api_keys (key_id),
	signed_by text   NOT NULL,
	signed_ns bigint NOT NULL,
	signature bytea  NOT NULL
);

CREATE TRIGGER api_key_signatures_append_only BEFORE UPDATE OR DELETE ON api_key_signatures
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER api_key_signatures_no_truncate BEFORE TRUNCATE ON api_key_signatures
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
