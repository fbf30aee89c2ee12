-- An API key's actor type (auth.Key.ActorType; NULL for AGENT, the
-- default) and the principals it may act for (auth.Key.ActsFor, a JSON
-- array of "TYPE:ID" patterns; NULL for none). Written with the key and
-- covered by its signature when set (docs/ledger-format.md §3.5,
-- docs/trust.md).
ALTER TABLE api_keys ADD COLUMN actor_type text;
ALTER TABLE api_keys ADD COLUMN acts_for text;
