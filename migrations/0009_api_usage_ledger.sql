-- The usage ledger: one row per Claude API response the credential proxy
-- metered, priced by the daemon's own table (internal/credproxy/pricing.go).
-- Budgets and the cost today read it; the CLI's own figures (usage) are a
-- cross-check only. A row is committed as its response ends, so a crash
-- loses at most the requests in flight.
CREATE TABLE api_usage (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    folder             TEXT NOT NULL,
    at                 INTEGER NOT NULL,
    model              TEXT NOT NULL DEFAULT '',
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0 CHECK (cost_usd >= 0)
) STRICT;
CREATE INDEX api_usage_folder_at ON api_usage (folder, at);
CREATE INDEX api_usage_at ON api_usage (at);
-- Ledger rows older than the retention (BRIDGED_RETENTION) are folded into
-- one row per group and UTC day before they are pruned.
CREATE TABLE api_usage_daily (
    folder             TEXT NOT NULL,
    day                TEXT NOT NULL,
    requests           INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (folder, day)
) STRICT;
