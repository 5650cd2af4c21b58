-- A message that carries a file keeps the file's name and size on its row:
-- the copy in data/outbox/ is removed once the message is sent (or failed
-- for good), and the per-group caps on staged files (files per minute,
-- bytes per day) are counted from these rows.
ALTER TABLE outbox ADD COLUMN file_name TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN file_size INTEGER NOT NULL DEFAULT 0;
CREATE INDEX outbox_files ON outbox (folder, created_at) WHERE file_name != '';
