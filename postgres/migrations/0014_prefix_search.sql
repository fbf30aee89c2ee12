-- Prefix search of GET /v1/records (decision_key_prefix, subject_prefix):
-- indexes in byte order (COLLATE "C"), so that a prefix is the range from
-- it to it followed by U+10FFFF whatever the database's collation.
CREATE INDEX records_decision_key_prefix ON records (tenant_id, decision_key COLLATE "C", seq);
CREATE INDEX record_subjects_prefix ON record_subjects (tenant_id, subject_id COLLATE "C");
