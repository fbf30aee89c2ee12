-- The history window index covers the sum a history read is (issue 31):
-- amount and seq ride in the index, as PostgreSQL's INCLUDE (amount, seq)
-- has them, so that a read sums its group's contributions from the index
-- alone, without a lookup of each row in the table. A tool-call meter's
-- read (writ.tool_calls) sums every contribution of its session, one a
-- check, twice a check (once to decide, once in the append transaction).
CREATE INDEX history_contributions_sum ON history_contributions (tenant_id, aggregate, group_key, at_ns, amount, seq);
DROP INDEX history_contributions_window;
