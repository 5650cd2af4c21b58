-- A task counts its failed runs in a row: a good run or a resume sets the
-- count back to 0. A task that reaches the configured most failures in a row
-- pauses itself; paused_by_failures says so, so `tasks list` can tell it
-- from a task a person paused. Resuming clears both.
ALTER TABLE tasks ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN paused_by_failures INTEGER NOT NULL DEFAULT 0;
