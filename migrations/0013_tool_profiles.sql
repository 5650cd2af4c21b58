-- Each group's tool profile (full, ask, read-only, chat): what its agent may
-- do without the owner. Groups registered before this column keep full.
ALTER TABLE registered_groups ADD COLUMN tools TEXT NOT NULL DEFAULT 'full';
-- Approval requests: a tool call a group's profile sends to the owner, and
-- its decision. state is open, allowed or denied; decided_by says who or what
-- settled it (cli, chat, reaction, timeout, restart, ...); outbox_id is the
-- request's message in the main chat (a quote or reaction names its sent id). An open request is
-- settled once: every decision is an UPDATE ... WHERE state = 'open'.
CREATE TABLE approvals (
    id          TEXT PRIMARY KEY,
    folder      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    tool        TEXT NOT NULL,
    subject     TEXT NOT NULL,
    rule        TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'open',
    outbox_id   INTEGER NOT NULL DEFAULT 0,
    asked_at    INTEGER NOT NULL,
    decided_at  INTEGER NOT NULL DEFAULT 0,
    decided_by  TEXT NOT NULL DEFAULT '',
    always      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (folder, request_id)
) STRICT;
CREATE INDEX approvals_state ON approvals (state);
CREATE INDEX approvals_outbox ON approvals (outbox_id) WHERE outbox_id != 0;
-- Standing rules added by an approval with --always: tool calls of the
-- group whose rule text matches run without asking.
CREATE TABLE approval_rules (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    folder     TEXT NOT NULL,
    rule       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    UNIQUE (folder, rule)
) STRICT;
-- Notices bridged owes the owner once, taken at the next start: groups
-- registered before tool profiles keep full, and the owner is told how to
-- change that.
CREATE TABLE pending_notices (name TEXT PRIMARY KEY) STRICT;
INSERT INTO pending_notices (name)
    SELECT 'tool_profiles' WHERE EXISTS (SELECT 1 FROM registered_groups WHERE is_main = 0);
