-- Request envelopes, kept with their records. Each check, attempt,
-- approval decision and execution report pins the request it was made
-- from (replay.replay_packet_id, the envelope's content address). Until
-- this table, envelopes were blobs, found by that hash: every append
-- wrote a random key into the blobs' primary key, a leaf page of its own
-- at each commit, and one the buffer cache had long dropped once the
-- index was large. Here an envelope is keyed by its record's place in the
-- chain, so an append writes at the right edge of the index. hash is the
-- envelope's content address, which the record pins and `writ ledger
-- verify` checks. Older envelopes stay in blobs, where Store.Envelope
-- still finds them. Append-only, like the ledger's other tables.
CREATE TABLE envelopes (
	tenant_id text   NOT NULL,
	seq       bigint NOT NULL CHECK (seq > 0),
	hash      text   NOT NULL,
	data      bytea  NOT NULL,
	PRIMARY KEY (tenant_id, seq)
);

ALTER TABLE envelopes ALTER COLUMN data SET COMPRESSION lz4;

CREATE TRIGGER envelopes_append_only BEFORE UPDATE OR DELETE ON envelopes
	FOR EACH ROW EXECUTE FUNCTION writ_refuse();
CREATE TRIGGER envelopes_no_truncate BEFORE TRUNCATE ON envelopes
	FOR EACH STATEMENT EXECUTE FUNCTION writ_refuse();
