-- Tool transcripts (issue 32): an execution report's record carries its
-- call's entry in the tool transcript of its run (execution.transcript),
-- and is indexed in record_terms under term 'transcript' with the
-- transcript's name, so a run's transcript is read in chain order through
-- record_terms' key (Store.Transcript, Store.TranscriptHead). No record
-- appended before this migration has a transcript entry, so nothing is
-- backfilled.
ALTER TABLE record_terms DROP CONSTRAINT record_terms_term_check;
ALTER TABLE record_terms ADD CONSTRAINT record_terms_term_check CHECK (term IN ('policy_decision_id', 'approver', 'refers_to', 'scorecard', 'transcript'));
