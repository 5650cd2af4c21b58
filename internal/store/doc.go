// Package store is bridged's SQLite database (store/bridged.db): chats,
// messages, registered groups, Claude sessions, cursors, the outbox, usage,
// and scheduled tasks with their run log.
//
// # Connections
//
// The database runs in WAL mode with foreign keys on and a 10 s busy timeout.
// Every write goes through one writer connection whose transactions begin
// IMMEDIATE, so writers queue in Go instead of racing for SQLite's lock and
// "database is locked" never reaches a caller, even with a second process on
// the same file. Plain reads use a small read-only pool and never wait for
// the writer.
//
// # Queries by table
//
// DB's methods are only what is the database's: Open, Close, Tx,
// SchemaVersion, Ping, Size, Stats and Prune (which span every table). The
// typed queries live on one small type per table or concern, a field of DB
// that holds the database handle (queries.go): db.Chats, db.Messages,
// db.Groups, db.Sessions (with the cursors), db.Tasks (with the run log),
// db.Outbox, db.Usage, db.Turns, db.Approvals, db.Notices, db.Budget,
// db.Requests (handled IPC requests), db.Media and db.Changes (what each turn changed,
// internal/snapshot), as in
// db.Tasks.Create(ctx, t). A Tx has the same fields for the queries that run
// inside a transaction: tx.Tasks.Create(ctx, t). TestMethodCounts bounds
// DB and Tx to 15 methods and every query type to 20.
//
// # Groups in memory
//
// The registered groups are read from a snapshot in memory (registry.go):
// Groups.ByChat, Groups.ByFolder, Groups.Main and Groups.List make no trip
// to SQLite once it is loaded. A committed transaction that registered,
// changed or removed a group drops it, whatever path the change came
// through; Groups.Version counts those changes.
//
// # Migrations
//
// The schema is the numbered files in package migrations, each applied once
// in its own transaction and recorded in schema_migrations. Opening a
// database that a newer bridged has migrated fails with ErrSchemaTooNew.
//
// # Schema decisions
//
//   - Times are stored as unix milliseconds and converted to time.Time (UTC)
//     at the edge; a nil *time.Time is SQL NULL ("none").
//   - Messages get an integer id in arrival order. A group's cursor is such
//     an id (the last message handed to its agent), never a timestamp:
//     WhatsApp timestamps have one-second resolution and arrive out of order.
//     Ids are never reused, so a cursor stays meaningful forever.
//   - (chat, external id) is unique: a redelivered message is stored once and
//     Messages.Insert reports inserted=false with the existing id.
//   - Text is stored only for registered chats (groups). For any other chat
//     Messages.Insert updates the chat's metadata and stores nothing else.
//     Messages with empty text are not stored either.
//   - A message whose external id the outbox chose is marked IsBot, whatever
//     the channel said. Outbox.MarkSent also records the sent text as a message
//     (FromMe, IsBot) in a registered chat, so messages holds both directions
//     in one order; readers that want only people's messages skip IsBot.
//   - Cost has two records: the usage ledger (api_usage, Usage.AddAPI), one
//     row per Claude API response the credential proxy metered and priced,
//     which Usage.CostSince and Usage.GroupCostSince (budgets, "cost today") read; and
//     usage, each turn's cost as the CLI reported it, a cross-check only
//     (Usage.ReportedCostSince). Usage.GroupCostSince keeps the total since the last
//     time asked for in memory, added to by each AddAPIUsage.
//
// # Outbox
//
// Every message bridged sends is first committed to the outbox (state
// pending), then sent. Outbox.Enqueue chooses the channel message id
// (ExternalID, WhatsApp style "3EB0" + 16 hex) before the first attempt; every
// retry reuses it, so a retried send is idempotent and our own echoes are
// recognised (Outbox.IsOwn). A row moves pending → sent (Outbox.MarkSent) or
// pending → failed (Outbox.MarkFailed); Outbox.MarkAttempt records a failed attempt that
// will be retried. On start, Outbox.Pending lists what still has to go out.
// One row is one channel message: long text is split before it is enqueued.
//
// # Transactions
//
// Writes that must happen together use DB.Tx, whose *Tx has the same query
// fields as *DB with the typed writes. A reply is committed like this:
//
//	err := db.Tx(ctx, func(tx *store.Tx) error {
//		if _, err := tx.Outbox.Enqueue(ctx, item); err != nil {
//			return err
//		}
//		if err := tx.Sessions.Set(ctx, sess); err != nil {
//			return err
//		}
//		return tx.Usage.Add(ctx, usage)
//	})
//
// Inside the function use only tx: a write through the *DB would wait for
// the writer connection the transaction holds.
//
// # Tasks
//
// Tasks.ClaimDue selects due tasks and advances their next run in one IMMEDIATE
// transaction, so a task is never claimed twice, and records each claimed run
// at once as a 'running' row of the run log (one per task at most), which
// Tasks.FinishRun completes. A task with no next run (a once task) becomes
// 'running' when claimed and 'done' when Tasks.FinishRun records its run. A run
// interrupted by a restart — its 'running' row found at start — is closed by
// Tasks.FailInterrupted as an "interrupted" error run, never repeated, and its
// notice is committed in the same transaction. A due task whose 'running'
// row is still open (its run queued or running) is handed to the decide
// function as RunInFlight, so its slot can be skipped rather than the task
// queued twice. Tasks.FinishRun also keeps the task's count of failed runs in
// a row (an ok run sets it to 0) and pauses the task, PausedByFailures, when
// it reaches the run's PauseAfter.
//
// # Handled requests
//
// An agent's IPC request that changes something is recorded
// (RequestTx.Record: group folder, request id, type, response JSON) in the
// transaction that makes its effect, so a request seen again is answered from
// the record (RequestQuery.Get) and never carried out twice. When the
// transaction belongs to someone else (the router commits a send_message's
// outbox row), the recording is a Unit the IPC host passes to the code that
// owns the transaction, which applies it there after the insert.
// Records older than a week are pruned at start (Requests.Prune). Cancelling a task deletes it and keeps
// its run log, a run in flight closed as cancelled (Tasks.Delete). Removing a group leaves its tasks in place; the
// scheduler pauses them (Tasks.Pause) with a reason.
//
// # Retention and health
//
// Prune removes, one bounded batch per transaction, only rows nothing needs
// any more: messages at or behind their group's stored cursor, sent or
// finally failed outbox rows, finished task runs, and usage rows, which are
// first folded into usage_daily (one row per group and UTC day), as the
// usage ledger's rows (api_usage) are into api_usage_daily. Messages
// after a cursor, of a chat with no cursor or no group, pending outbox rows
// and running task runs are never removed; nor are sessions, cursors, groups,
// tasks or chats. internal/retention calls it in the background. Size is
// the database's size for `bridged status`. Ping begins a write transaction
// and rolls it back: it fails while the writer is held by a call that never
// returns or another process keeps SQLite's write lock.
package store
