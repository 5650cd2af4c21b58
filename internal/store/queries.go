package store

// The typed queries are grouped by table or concern, as fields of DB and of
// Tx: db.Tasks.Create runs in its own transaction, tx.Tasks.Create inside
// tx. Each query type holds only the handle it runs on; DB itself keeps what
// is the database's (opening, closing, transactions, migrations, the group
// registry in memory and the checks that span every table).

// ChatQuery reads and writes chats (metadata of every chat seen).
type ChatQuery struct{ db *DB }

// MessageQuery reads and writes messages.
type MessageQuery struct{ db *DB }

// GroupQuery reads and writes registered groups; reads come from the
// registry in memory.
type GroupQuery struct{ db *DB }

// SessionQuery reads and writes each group's Claude session and cursor.
type SessionQuery struct{ db *DB }

// TaskQuery reads and writes scheduled tasks and their run log.
type TaskQuery struct{ db *DB }

// OutboxQuery reads and writes the outbox.
type OutboxQuery struct{ db *DB }

// UsageQuery reads and writes the usage ledger and the turns' reported cost.
type UsageQuery struct{ db *DB }

// TurnQuery reads and writes the ends of agent turns.
type TurnQuery struct{ db *DB }

// ApprovalQuery reads and writes approvals and approval rules.
type ApprovalQuery struct{ db *DB }

// NoticeQuery reads and takes the daemon's pending notices.
type NoticeQuery struct{ db *DB }

// BudgetQuery reads and writes budget decisions.
type BudgetQuery struct{ db *DB }

// RequestQuery reads and prunes the handled IPC requests.
type RequestQuery struct{ db *DB }

// MediaQuery reads and writes the media of messages.
type MediaQuery struct{ db *DB }

// PollQuery reads and commits the offsets of polled channels.
type PollQuery struct{ db *DB }

// ChangeQuery reads and writes what each turn changed in its group's
// folder and memory (the snapshots' records).
type ChangeQuery struct{ db *DB }

// bindQueries gives db its query fields.
func bindQueries(db *DB) {
	db.Chats, db.Messages, db.Groups = &ChatQuery{db}, &MessageQuery{db}, &GroupQuery{db}
	db.Sessions, db.Tasks, db.Outbox = &SessionQuery{db}, &TaskQuery{db}, &OutboxQuery{db}
	db.Usage, db.Turns, db.Approvals = &UsageQuery{db}, &TurnQuery{db}, &ApprovalQuery{db}
	db.Notices, db.Budget, db.Requests = &NoticeQuery{db}, &BudgetQuery{db}, &RequestQuery{db}
	db.Media, db.Polls, db.Changes = &MediaQuery{db}, &PollQuery{db}, &ChangeQuery{db}
}

// ChatTx writes chats inside a transaction.
type ChatTx struct{ tx *Tx }

// MessageTx writes messages inside a transaction.
type MessageTx struct{ tx *Tx }

// GroupTx reads and writes registered groups inside a transaction.
type GroupTx struct{ tx *Tx }

// SessionTx reads and writes sessions and cursors inside a transaction.
type SessionTx struct{ tx *Tx }

// TaskTx reads and writes tasks inside a transaction.
type TaskTx struct{ tx *Tx }

// OutboxTx writes the outbox inside a transaction.
type OutboxTx struct{ tx *Tx }

// UsageTx writes the turns' reported cost inside a transaction.
type UsageTx struct{ tx *Tx }

// ApprovalTx reads and writes approvals and rules inside a transaction.
type ApprovalTx struct{ tx *Tx }

// RequestTx reads and writes handled IPC requests inside a transaction.
type RequestTx struct{ tx *Tx }

// MediaTx writes the media of messages inside a transaction.
type MediaTx struct{ tx *Tx }

// PollTx commits a polled channel's update inside a transaction.
type PollTx struct{ tx *Tx }

// bindTxQueries gives tx its query fields.
func bindTxQueries(tx *Tx) {
	tx.Chats, tx.Messages, tx.Groups = ChatTx{tx}, MessageTx{tx}, GroupTx{tx}
	tx.Sessions, tx.Tasks, tx.Outbox = SessionTx{tx}, TaskTx{tx}, OutboxTx{tx}
	tx.Usage, tx.Approvals, tx.Requests = UsageTx{tx}, ApprovalTx{tx}, RequestTx{tx}
	tx.Media, tx.Polls = MediaTx{tx}, PollTx{tx}
}
