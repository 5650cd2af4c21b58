-- The weekly memory summaries posted to the main chat
-- (BRIDGED_MEMORY_SUMMARY=weekly): one row per week summarised, named by
-- the end of that week (ms), written in the transaction that commits the
-- summary to the outbox, so a restart never posts a week twice.
CREATE TABLE memory_summaries (
    week_end  INTEGER PRIMARY KEY,
    posted_at INTEGER NOT NULL
) STRICT;
