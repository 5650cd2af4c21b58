-- A message's story (`bridged why`) is told from what is stored. stored_at
-- is when bridged stored the message (sent_at is the sender's clock); 0 for
-- messages stored before this column.
ALTER TABLE messages ADD COLUMN stored_at INTEGER NOT NULL DEFAULT 0;
-- How each agent turn of a chat ended, as the turns hub heard it: upto is
-- the newest message id the turn took; result is done, failed (retried) or
-- gave_up; attempt/attempts count the tries of a failed turn. Pruned with the
-- retention (BRIDGED_RETENTION).
CREATE TABLE turn_ends (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    chat     TEXT NOT NULL,
    upto     INTEGER NOT NULL,
    result   TEXT NOT NULL,
    reason   TEXT NOT NULL DEFAULT '',
    attempt  INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    at       INTEGER NOT NULL
) STRICT;
CREATE INDEX turn_ends_chat ON turn_ends (chat, upto);
CREATE INDEX turn_ends_at ON turn_ends (at);
