-- A task run is claimed visibly: the claim inserts a 'running' row into the
-- run log, which the end of the run completes. A 'running' row found at start
-- is a run a stopped daemon left in flight; it becomes an error run
-- ("interrupted"). SQLite cannot change a CHECK constraint, so the table is
-- rebuilt with the same columns.
CREATE TABLE task_runs_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
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
-- At most one run of a task in flight.
CREATE UNIQUE INDEX task_runs_running ON task_runs (task_id) WHERE status = 'running';
