-- Reserved: version 0006 belongs to another change (execution reports).
-- This placeholder keeps the versions contiguous on this branch; it is
-- replaced by the real 0006 when the branches merge.
SELECT 1;
