-- What each agent turn changed in its group's folder and memory
-- (internal/snapshot): the roots of the snapshots taken when the turn began
-- (before_*) and ended (after_*, empty while it runs), each the hash of a
-- tree object in data/snapshots/. The row is written only after every
-- object it names is on disk, so a row never names a missing object. kind
-- is turn, task or undo; undoes is the change an undo took back; plan is
-- the hash of an undo's list of writes, so an undo cut off by a crash is
-- finished at the next start. source names who, other than the owner, wrote
-- the messages the turn took (empty: the owner alone, or a task). The counts summarise the change: files
-- added, removed and modified outside memory, lines of memory added and
-- removed. Pruned with the retention (BRIDGED_RETENTION).
CREATE TABLE turn_changes (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    folder         TEXT NOT NULL,
    chat           TEXT NOT NULL DEFAULT '',
    kind           TEXT NOT NULL,
    upto           INTEGER NOT NULL DEFAULT 0,
    task           TEXT NOT NULL DEFAULT '',
    undoes         INTEGER NOT NULL DEFAULT 0,
    plan           TEXT NOT NULL DEFAULT '',
    source         TEXT NOT NULL DEFAULT '',
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER NOT NULL DEFAULT 0,
    before_files   TEXT NOT NULL,
    before_memory  TEXT NOT NULL,
    after_files    TEXT NOT NULL DEFAULT '',
    after_memory   TEXT NOT NULL DEFAULT '',
    files_added    INTEGER NOT NULL DEFAULT 0,
    files_removed  INTEGER NOT NULL DEFAULT 0,
    files_modified INTEGER NOT NULL DEFAULT 0,
    memory_added   INTEGER NOT NULL DEFAULT 0,
    memory_removed INTEGER NOT NULL DEFAULT 0,
    note           TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX turn_changes_folder ON turn_changes (folder, id);
CREATE INDEX turn_changes_upto ON turn_changes (folder, upto);
CREATE INDEX turn_changes_open ON turn_changes (ended_at) WHERE ended_at = 0;
CREATE INDEX turn_changes_started ON turn_changes (started_at);
