-- A message that reached bridged long after it was sent (WhatsApp's history
-- sync or its offline backlog after a long disconnect) is kept as context,
-- but its trigger does not wake the agent; the flag is stored so that it
-- still does not after a restart.
ALTER TABLE messages ADD COLUMN late INTEGER NOT NULL DEFAULT 0;
