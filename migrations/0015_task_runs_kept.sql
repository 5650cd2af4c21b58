-- Cancelling a task keeps its run log: the runs no longer go with their task
-- (the foreign key with ON DELETE CASCADE is dropped); they go with the
-- retention, as every finished run does. SQLite cannot drop a foreign key,
-- so the table is rebuilt with the same columns and indexes.
CREATE TABLE task_runs_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'error', 'running')),
    result      TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    cost_usd    REAL NOT NULL DEFAULT 0
) STRICT;
INSERT INTO task_runs_new (id, task_id, started_at, duration_ms, status, result, error, cost_usd)
    SELECT id, task_id, started_at, duration_ms, status, result, error, cost_usd FROM task_runs;
DROP TABLE task_runs;
ALTER TABLE task_runs_new RENAME TO task_runs;
CREATE INDEX task_runs_task ON task_runs (task_id, id);
CREATE UNIQUE INDEX task_runs_running ON task_runs (task_id) WHERE status = 'running';
CREATE INDEX task_runs_started ON task_runs (started_at);
