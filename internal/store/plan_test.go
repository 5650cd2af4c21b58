package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"modernc.org/sqlite"
)

// recorder keeps every statement text the store prepares or runs.
type recorder struct {
	mu   sync.Mutex
	on   bool
	seen map[string]bool
}

func (r *recorder) add(q string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.seen[q] = true
	}
}

// take returns the statements recorded since the last take and starts over.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.seen))
	for q := range r.seen {
		out = append(out, q)
	}
	sort.Strings(out)
	r.seen = map[string]bool{}
	return out
}

func (r *recorder) record(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = on
}

// recDriver is modernc.org/sqlite's driver recording each statement.
type recDriver struct{ rec *recorder }

func (d recDriver) Open(name string) (driver.Conn, error) {
	c, err := (&sqlite.Driver{}).Open(name)
	if err != nil {
		return nil, err
	}
	return recConn{c, d.rec}, nil
}

type recConn struct {
	driver.Conn
	rec *recorder
}

func (c recConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.rec.add(q)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c recConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.rec.add(q)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c recConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.rec.add(q)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c recConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

var (
	planRec      = &recorder{seen: map[string]bool{}}
	planRegister sync.Once
)

// openRecorded opens a test database whose statements planRec records.
func openRecorded(t *testing.T) *DB {
	t.Helper()
	planRegister.Do(func() { sql.Register("sqlite-plan", recDriver{planRec}) })
	old := driverName
	driverName = "sqlite-plan"
	defer func() { driverName = old }()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "bridged.db"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	db.now = func() time.Time { return t0 }
	t.Cleanup(func() { db.Close() })
	return db
}

// bigTables grow with history: a statement on the message path must never
// read one of them whole.
var bigTables = []string{"messages", "outbox", "media", "turn_ends", "usage", "api_usage",
	"budget_decisions", "task_runs", "approvals", "handled_requests", "chats"}

var (
	scanLine = regexp.MustCompile(`\bSCAN (\w+)`)
	// wholeChat: a search bounded by the chat or group alone (or by an id
	// range over every chat) reads all of a chat's history.
	wholeChat = regexp.MustCompile(`\bSEARCH (\w+) .*\((chat=\?|folder=\?|rowid>\?)\)$`)
)

// boundedAnyway are statements whose plan reads as a whole chat's rows but
// which SQLite answers from one end of the index (MIN/MAX optimisation).
var boundedAnyway = map[string]bool{
	"SELECT COALESCE(MAX(id), 0) FROM messages WHERE chat = ?": true,
}

var alias = regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+(\w+)\s+(?:AS\s+)?(\w+)`)

// tableOf is the table name a plan's name stands for in q: itself, or the
// table it aliases.
func tableOf(q, name string) string {
	for _, m := range alias.FindAllStringSubmatch(q, -1) {
		if m[2] == name {
			return m[1]
		}
	}
	return name
}

// planScans returns the lines of q's query plan that read a big table
// whole (SCAN rather than SEARCH … USING INDEX) or a chat's history whole
// (a SEARCH bounded by the chat alone), and the plan.
func planScans(t *testing.T, db *DB, q string) (bad []string, plan string) {
	t.Helper()
	n := strings.Count(q, "?")
	args := make([]any, n)
	rows, err := db.write.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", q, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
		m := scanLine.FindStringSubmatch(detail)
		if m == nil && !boundedAnyway[strings.Join(strings.Fields(q), " ")] {
			m = wholeChat.FindStringSubmatch(detail)
		}
		if m != nil && slices.Contains(bigTables, tableOf(q, m[1])) {
			bad = append(bad, detail)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return bad, strings.Join(lines, "; ")
}

// checkPlans fails the test for each recorded statement that scans a big
// table, naming the step that ran it.
func checkPlans(t *testing.T, db *DB, step string) {
	t.Helper()
	qs := planRec.take()
	if len(qs) == 0 {
		t.Errorf("%s: no statement recorded", step)
	}
	for _, q := range qs {
		if !planned(q) {
			continue
		}
		bad, plan := planScans(t, db, q)
		t.Logf("%s: %s\n  => %s", step, strings.Join(strings.Fields(q), " "), plan)
		if len(bad) > 0 {
			t.Errorf("%s: a statement reads a whole table (%s):\n%s\nplan: %s", step, strings.Join(bad, ", "), q, plan)
		}
	}
}

// planned: statements with a query plan (not BEGIN, COMMIT, PRAGMA, …).
func planned(q string) bool {
	w := strings.ToUpper(strings.Fields(strings.TrimSpace(q) + " x")[0])
	switch w {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH":
		return true
	}
	return false
}

// TestMessagePathUsesIndexes runs each step of the message path (a message
// stored, the pending messages after the cursor read, an agent's turn
// committed, its reply sent and recorded) and asks SQLite for the plan of
// every statement it ran: none may read a table that grows with history
// whole. A per-message cost that grows with a chat's history starts here.
func TestMessagePathUsesIndexes(t *testing.T) {
	ctx := context.Background()
	db := openRecorded(t)
	addGroup(t, db, "g@g.us", "grp")
	planRec.record(true)
	defer planRec.record(false)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	planRec.take()

	// Ingest: a person's message, stored with its chat's metadata; again
	// (a duplicate); one with media.
	var first MessageID
	must(db.Tx(ctx, func(tx *Tx) error {
		var err error
		first, _, err = tx.InsertMessageIn(ctx, Chat{ID: "g@g.us", Name: "G", Channel: "whatsapp", IsGroup: true},
			Message{Chat: "g@g.us", ExternalID: "in-1", Sender: "s", Text: "@Andy hi"})
		return err
	}))
	_, _, err := db.InsertMessage(ctx, Message{Chat: "g@g.us", ExternalID: "in-1", Text: "@Andy hi"})
	must(err)
	if _, err := db.IsOwnMessage(ctx, "g@g.us", "in-1"); err != nil {
		t.Fatal(err)
	}
	checkPlans(t, db, "ingest")

	var withMedia MessageID
	must(db.Tx(ctx, func(tx *Tx) error {
		var err error
		withMedia, _, err = tx.InsertMessage(ctx, Message{Chat: "g@g.us", ExternalID: "in-2", Text: "photo"})
		if err != nil {
			return err
		}
		return tx.InsertMedia(ctx, Media{MessageID: withMedia, Chat: "g@g.us", Source: "whatsapp", Ref: []byte(`{}`), Label: "image", Name: "a.jpg", State: MediaPending})
	}))
	_, err = db.SettleMedia(ctx, withMedia, MediaSaved, "[image]")
	must(err)
	checkPlans(t, db, "ingest with media")

	// The router: the cursor, the pending messages after it, the budget.
	cur, err := db.GetCursor(ctx, "grp")
	must(err)
	_, _, err = db.PendingMessages(ctx, "g@g.us", cur, 50)
	must(err)
	_, err = db.MessagesAfter(ctx, "g@g.us", cur, 50)
	must(err)
	_, err = db.LatestMessageID(ctx, "g@g.us")
	must(err)
	_, err = db.GroupCostSince(ctx, "grp", t0.Add(-time.Hour))
	must(err)
	must(db.RecordBudgetDecision(ctx, BudgetDecision{Folder: "grp", Chat: "g@g.us", After: cur, Upto: first, Verdict: BudgetAdmitted}))
	_, err = db.GetSession(ctx, "grp")
	must(err)
	checkPlans(t, db, "pending messages after the cursor")

	// The agent's turn committed: cursor, session, usage and reply at once.
	var reply OutboxItem
	must(db.Tx(ctx, func(tx *Tx) error {
		if err := tx.SetCursor(ctx, "grp", withMedia); err != nil {
			return err
		}
		if err := tx.SetSession(ctx, Session{Folder: "grp", SessionID: "s1"}); err != nil {
			return err
		}
		if err := tx.AddUsage(ctx, Usage{Folder: "grp", CostUSD: 0.01}); err != nil {
			return err
		}
		var err error
		reply, err = tx.EnqueueOutbox(ctx, OutboxItem{Chat: "g@g.us", Group: "grp", Text: "hello", Origin: OriginReply})
		return err
	}))
	must(db.AddAPIUsage(ctx, APIUsage{Folder: "grp", Model: "m", CostUSD: 0.01}))
	must(db.AddTurnEnd(ctx, TurnEnd{Chat: "g@g.us", Upto: withMedia, Result: "done"}))
	checkPlans(t, db, "agent turn commit")

	// The outbox: due rows, a failed attempt, the send recorded (its text
	// stored as the chat's message), a row that fails for good.
	_, err = db.PendingOutbox(ctx, 100)
	must(err)
	must(db.MarkAttempt(ctx, reply.ID, "timeout"))
	_, err = db.GetOutbox(ctx, reply.ID)
	must(err)
	must(db.MarkSent(ctx, reply.ID, "sent-1", time.Time{}))
	other, err := db.EnqueueOutbox(ctx, OutboxItem{Chat: "g@g.us", Text: "notice", Origin: OriginNotice})
	must(err)
	must(db.MarkFailed(ctx, other.ID, "gone"))
	// The channel echoes the reply back under the id it reported.
	_, _, err = db.InsertMessage(ctx, Message{Chat: "g@g.us", ExternalID: "sent-1", Text: "hello", FromMe: true})
	must(err)
	checkPlans(t, db, "outbox due rows and mark sent")

	// A reply or reaction in the main chat that answers one of bridged's
	// notices (an approval request) is looked up by the id it quotes.
	if _, err := db.ApprovalBySentID(ctx, "sent-1"); !errorsIsNotFound(err) {
		t.Fatalf("ApprovalBySentID: %v", err)
	}
	if _, err := db.NoticeBySentID(ctx, "sent-1"); !errorsIsNotFound(err) {
		t.Fatalf("NoticeBySentID: %v", err)
	}
	checkPlans(t, db, "answer to a notice")
}

// TestPlanScansCatchesAScan: the check above does see a full read.
func TestPlanScansCatchesAScan(t *testing.T) {
	db := openTest(t)
	bad, plan := planScans(t, db, `SELECT COUNT(*) FROM messages WHERE text = ?`)
	if len(bad) == 0 {
		t.Fatalf("a scan of messages went unseen; plan: %s", plan)
	}
	bad, plan = planScans(t, db, `SELECT id FROM messages WHERE chat = ? AND id > ?`)
	if len(bad) != 0 {
		t.Fatalf("an index search was taken for a scan: %s", plan)
	}
}
