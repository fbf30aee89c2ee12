-- Request envelopes, kept with their records. Each check, attempt,
-- approval decision and execution report pins the request it was made
-- from (replay.replay_packet_id, the envelope's content address). Until
-- this table, envelopes were blobs, found by that hash: every append
-- wrote a random key into the blobs' index, a page of its own at each
-- commit, and a page the cache had long dropped once the table was large.
-- Here an envelope is keyed by its record's place in the chain, so an
-- append writes at the end of the table. hash is the envelope's content
-- address, which the record pins and `writ ledger verify` checks. Older
-- envelopes stay in blobs, where Store.Envelope still finds them.
CREATE TABLE envelopes (
	tenant_id TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	hash      TEXT    NOT NULL,
	data      BLOB    NOT NULL,
	PRIMARY KEY (tenant_id, seq),
	FOREIGN KEY (tenant_id, seq) REFERENCES records (tenant_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER envelopes_no_update BEFORE UPDATE ON envelopes
BEGIN SELECT RAISE(ABORT, 'envelopes are append-only: UPDATE refused'); END;
CREATE TRIGGER envelopes_no_delete BEFORE DELETE ON envelopes
BEGIN SELECT RAISE(ABORT, 'envelopes are append-only: DELETE refused'); END;
CREATE TRIGGER envelopes_no_replace BEFORE INSERT ON envelopes
WHEN EXISTS (SELECT 1 FROM envelopes WHERE tenant_id = NEW.tenant_id AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'envelopes are append-only: the envelope exists'); END;
