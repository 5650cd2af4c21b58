-- Initial schema. Times are unix milliseconds (UTC); booleans are 0/1.

-- Every chat a channel has seen, registered or not. Metadata only.
CREATE TABLE chats (
    id            TEXT PRIMARY KEY,               -- channel chat id (JID, local:<name>)
    name          TEXT NOT NULL DEFAULT '',
    channel       TEXT NOT NULL DEFAULT '',
    is_group      INTEGER NOT NULL DEFAULT 0,
    last_activity INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Message text, for registered chats only. The id orders arrival and is the
-- cursor; AUTOINCREMENT keeps ids from ever being reused.
CREATE TABLE messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    chat        TEXT NOT NULL REFERENCES chats(id),
    external_id TEXT NOT NULL,                    -- the channel's message id
    sender      TEXT NOT NULL DEFAULT '',
    sender_name TEXT NOT NULL DEFAULT '',
    text        TEXT NOT NULL,
    sent_at     INTEGER NOT NULL,                 -- the channel's timestamp
    from_me     INTEGER NOT NULL DEFAULT 0,
    is_bot      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (chat, external_id)
) STRICT;
CREATE INDEX messages_chat_id ON messages (chat, id);

-- Registered chats ("groups").
CREATE TABLE registered_groups (
    chat             TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    folder           TEXT NOT NULL UNIQUE,
    trigger_word     TEXT NOT NULL DEFAULT '',
    requires_trigger INTEGER NOT NULL DEFAULT 1,
    is_main          INTEGER NOT NULL DEFAULT 0,
    container_config TEXT NOT NULL DEFAULT '{}',  -- JSON
    created_at       INTEGER NOT NULL
) STRICT;
-- At most one main group.
CREATE UNIQUE INDEX registered_groups_one_main ON registered_groups (is_main) WHERE is_main = 1;

-- Claude session per group folder.
CREATE TABLE sessions (
    folder     TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    last_uuid  TEXT NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
) STRICT;

-- Per group folder, the id of the last message handed to the agent.
CREATE TABLE cursors (
    folder     TEXT PRIMARY KEY,
    message_id INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- Every message bridged sends. external_id is chosen at enqueue time and
-- reused on every attempt.
CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    chat        TEXT NOT NULL,
    folder      TEXT NOT NULL DEFAULT '',
    text        TEXT NOT NULL,
    origin      TEXT NOT NULL CHECK (origin IN ('reply', 'tool', 'task', 'notice')),
    state       TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
    external_id TEXT NOT NULL,
    sent_id     TEXT NOT NULL DEFAULT '',         -- the id the channel reported
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    sent_at     INTEGER,
    failed_at   INTEGER
) STRICT;
CREATE UNIQUE INDEX outbox_chat_external ON outbox (chat, external_id);
CREATE INDEX outbox_chat_sent ON outbox (chat, sent_id) WHERE sent_id != '';
CREATE INDEX outbox_state ON outbox (state, id);
CREATE INDEX outbox_failed ON outbox (failed_at) WHERE state = 'failed';

-- One row per agent turn, copied from the CLI's result message.
CREATE TABLE usage (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    folder        TEXT NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    cost_usd      REAL NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    duration_ms   INTEGER NOT NULL DEFAULT 0,
    num_turns     INTEGER NOT NULL DEFAULT 0,
    at            INTEGER NOT NULL
) STRICT;
CREATE INDEX usage_at ON usage (at);

-- Scheduled tasks. Tasks outlive their group (the scheduler pauses them).
-- status 'running' = claimed with no next run (a once task in flight).
CREATE TABLE tasks (
    id           TEXT PRIMARY KEY,
    folder       TEXT NOT NULL,
    chat         TEXT NOT NULL,
    prompt       TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('cron', 'interval', 'once')),
    value        TEXT NOT NULL,
    context_mode TEXT NOT NULL DEFAULT 'isolated' CHECK (context_mode IN ('group', 'isolated')),
    status       TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'running', 'done')),
    next_run     INTEGER,
    last_run     INTEGER,
    last_result  TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX tasks_due ON tasks (status, next_run);
CREATE INDEX tasks_folder ON tasks (folder);

CREATE TABLE task_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    started_at  INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    result      TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    cost_usd    REAL NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX task_runs_task ON task_runs (task_id, id);
