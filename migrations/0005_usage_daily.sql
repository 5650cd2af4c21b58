-- Usage older than the retention (BRIDGED_RETENTION) is folded into one row
-- per group and day before the raw rows are pruned, so totals outlive them.
-- day is the UTC date (YYYY-MM-DD) of the turns.
CREATE TABLE usage_daily (
    folder        TEXT NOT NULL,
    day           TEXT NOT NULL,
    turns         INTEGER NOT NULL DEFAULT 0,          -- raw usage rows folded in
    cost_usd      REAL NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    duration_ms   INTEGER NOT NULL DEFAULT 0,
    num_turns     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (folder, day)
) STRICT;
-- Pruning finds old rows by time.
CREATE INDEX outbox_sent_at ON outbox (sent_at) WHERE state = 'sent';
CREATE INDEX task_runs_started ON task_runs (started_at);
