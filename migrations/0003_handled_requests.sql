-- Agents' IPC requests that were carried out (DESIGN §8). A row is written in
-- the same transaction as the request's effect (the outbox row, the task, the
-- group), so a request seen again — after a restart, or with its response
-- file lost — is answered from here and never carried out twice. Rows older
-- than a few days are pruned at start.
CREATE TABLE handled_requests (
    folder     TEXT NOT NULL,                     -- the group whose directory it came from
    request_id TEXT NOT NULL,                     -- the id the agent chose
    type       TEXT NOT NULL,                     -- the tool's name
    response   TEXT NOT NULL,                     -- the response JSON, as written
    handled_at INTEGER NOT NULL,
    PRIMARY KEY (folder, request_id)
) STRICT;
CREATE INDEX handled_requests_at ON handled_requests (handled_at);
