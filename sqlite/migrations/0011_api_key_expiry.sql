-- An API key's expiry (auth.Key.ExpiresAt), in nanoseconds; NULL for a key
-- that does not expire. Written with the key and covered by its signature
-- (docs/ledger-format.md §3.5), so it cannot be moved or removed unseen.
ALTER TABLE api_keys ADD COLUMN expires_ns INTEGER;
