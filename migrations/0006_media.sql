-- Media of inbound messages, fetched after the message is stored (and the
-- network acknowledged it) by the media worker. A message's row is written in
-- the same transaction as the message; while it is pending, that message and
-- every later one of its chat wait (PendingMessages stops before it). When it
-- settles, the message's text becomes head || placeholder || tail.
CREATE TABLE media (
    message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    chat       TEXT NOT NULL,
    source     TEXT NOT NULL,                    -- the fetcher: whatsapp, upload
    ref        TEXT NOT NULL,                    -- what the fetcher needs (JSON)
    label      TEXT NOT NULL,                    -- placeholder label
    name       TEXT NOT NULL,                    -- file name in inbox/
    mime       TEXT NOT NULL DEFAULT '',
    size       INTEGER NOT NULL DEFAULT 0,       -- announced bytes, 0 unknown
    voice      INTEGER NOT NULL DEFAULT 0,       -- transcribe it
    seconds    INTEGER NOT NULL DEFAULT 0,       -- announced duration, 0 unknown
    head       TEXT NOT NULL DEFAULT '',
    tail       TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL DEFAULT 'pending',  -- pending, saved, failed
    detail     TEXT NOT NULL DEFAULT '',         -- the final placeholder
    attempts   INTEGER NOT NULL DEFAULT 0,       -- fetches started
    created_at INTEGER NOT NULL,
    settled_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX media_pending ON media (chat, message_id) WHERE state = 'pending';
