-- A message that mentions the bot (by number or LID) wakes a group's agent
-- like its trigger word does; the flag is stored so that it still does after
-- a restart.
ALTER TABLE messages ADD COLUMN mentioned INTEGER NOT NULL DEFAULT 0;
