-- The daily budget's word, recorded when it is given, so `bridged why` tells
-- it with the figures of that moment however the budget changed since. When
-- the router finds that a group's waiting messages wake its agent and a
-- budget is set, it records whether the budget let them through ('admitted')
-- or held them ('paused'): the chat's messages after after_id up to upto.
-- When the credential proxy refuses an API request of a group at its budget,
-- 'refused' (after_id and upto 0: the proxy knows the group, not the
-- message). budget_usd is the budget then, spent_usd what the group had
-- spent that day. Pruned with the retention (BRIDGED_RETENTION).
CREATE TABLE budget_decisions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    folder     TEXT NOT NULL,
    chat       TEXT NOT NULL,
    after_id   INTEGER NOT NULL DEFAULT 0,
    upto       INTEGER NOT NULL DEFAULT 0,
    verdict    TEXT NOT NULL CHECK (verdict IN ('admitted', 'paused', 'refused')),
    budget_usd REAL NOT NULL,
    spent_usd  REAL NOT NULL,
    at         INTEGER NOT NULL
) STRICT;
CREATE INDEX budget_decisions_chat ON budget_decisions (chat, upto);
CREATE INDEX budget_decisions_folder ON budget_decisions (folder, at);
CREATE INDEX budget_decisions_at ON budget_decisions (at);
