-- A channel that polls its network for updates (Telegram's getUpdates)
-- keeps here the id of the next update it has not committed: each update
-- advances it in the transaction that stores what the update carried, and
-- the next poll asks from it, so an update is committed once and never
-- confirmed to the network before its commit.
CREATE TABLE poll_offsets (
    channel   TEXT PRIMARY KEY,
    next      INTEGER NOT NULL,
    polled_at INTEGER NOT NULL DEFAULT 0
);
