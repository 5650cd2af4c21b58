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
	"budget_decisions", "task_runs", "approvals", "handled_requests"}

var (
	scanLine = regexp.MustCompile(`\bSCAN (\w+)`)
	// wholeChat: a search bounded by the chat or group alone (or by an id
	// range over every chat) reads all of a chat's history.
	wholeChat = regexp.MustCompile(`\bSEARCH (\w+) .*\((chat=\?|folder=\?|rowid>\?)\)$`)
)

// boundedAnyway are parts of statements whose plan reads as a whole
// table or chat but which SQLite answers from one end of the table or an
// index: the newest rows first with a LIMIT, or MIN/MAX.
var boundedAnyway = []string{
	"SELECT COALESCE(MAX(id), 0) FROM messages WHERE chat = ?",
	"WHERE chat = ? ORDER BY id DESC LIMIT ?",
	"WHERE chat = ? AND is_bot = 0 ORDER BY id DESC LIMIT 1",
	"WHERE is_bot = 0 AND ? = '' ORDER BY id DESC LIMIT 1",
	"FROM approvals ORDER BY asked_at DESC, id DESC LIMIT",
}

func isBoundedAnyway(q string) bool {
	q = strings.Join(strings.Fields(q), " ")
	for _, b := range boundedAnyway {
		if strings.Contains(q, b) {
			return true
		}
	}
	return false
}

var scanIndex = regexp.MustCompile(`\bSCAN \w+ USING (?:COVERING )?INDEX (\w+)`)

// partialIndex: a SCAN of a partial index (the rows in one state, pending
// say) reads only the rows of that state, not the table.
func partialIndex(t *testing.T, db *DB, line string) bool {
	t.Helper()
	m := scanIndex.FindStringSubmatch(line)
	if m == nil {
		return false
	}
	var def string
	if err := db.write.QueryRowContext(context.Background(), `SELECT COALESCE(sql, '') FROM sqlite_master WHERE type = 'index' AND name = ?`, m[1]).Scan(&def); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(strings.ToUpper(def), " WHERE ")
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
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close() // the writer's one connection: partialIndex asks it next
	for _, detail := range lines {
		if isBoundedAnyway(q) {
			break
		}
		m := scanLine.FindStringSubmatch(detail)
		if m != nil && partialIndex(t, db, detail) {
			m = nil
		} else if m == nil {
			m = wholeChat.FindStringSubmatch(detail)
		}
		if m != nil && slices.Contains(bigTables, tableOf(q, m[1])) {
			bad = append(bad, detail)
		}
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
		first, _, err = tx.Messages.InsertIn(ctx, Chat{ID: "g@g.us", Name: "G", Channel: "whatsapp", IsGroup: true},
			Message{Chat: "g@g.us", ExternalID: "in-1", Sender: "s", Text: "@Andy hi"})
		return err
	}))
	_, _, err := db.Messages.Insert(ctx, Message{Chat: "g@g.us", ExternalID: "in-1", Text: "@Andy hi"})
	must(err)
	if _, err := db.Outbox.IsOwn(ctx, "g@g.us", "in-1"); err != nil {
		t.Fatal(err)
	}
	checkPlans(t, db, "ingest")

	var withMedia MessageID
	must(db.Tx(ctx, func(tx *Tx) error {
		var err error
		withMedia, _, err = tx.Messages.Insert(ctx, Message{Chat: "g@g.us", ExternalID: "in-2", Text: "photo"})
		if err != nil {
			return err
		}
		return tx.Media.Insert(ctx, Media{MessageID: withMedia, Chat: "g@g.us", Source: "whatsapp", Ref: []byte(`{}`), Label: "image", Name: "a.jpg", State: MediaPending})
	}))
	_, err = db.Media.Settle(ctx, withMedia, MediaSaved, "[image]")
	must(err)
	checkPlans(t, db, "ingest with media")

	// The router: the cursor, the pending messages after it, the budget.
	cur, err := db.Sessions.Cursor(ctx, "grp")
	must(err)
	_, _, err = db.Messages.Pending(ctx, "g@g.us", cur, 50)
	must(err)
	_, err = db.Messages.After(ctx, "g@g.us", cur, 50)
	must(err)
	_, err = db.Messages.LatestID(ctx, "g@g.us")
	must(err)
	_, err = db.Usage.GroupCostSince(ctx, "grp", t0.Add(-time.Hour))
	must(err)
	must(db.Budget.Record(ctx, BudgetDecision{Folder: "grp", Chat: "g@g.us", After: cur, Upto: first, Verdict: BudgetAdmitted}))
	_, err = db.Sessions.Get(ctx, "grp")
	must(err)
	checkPlans(t, db, "pending messages after the cursor")

	// The agent's turn committed: cursor, session, usage and reply at once.
	var reply OutboxItem
	must(db.Tx(ctx, func(tx *Tx) error {
		if err := tx.Sessions.SetCursor(ctx, "grp", withMedia); err != nil {
			return err
		}
		if err := tx.Sessions.Set(ctx, Session{Folder: "grp", SessionID: "s1"}); err != nil {
			return err
		}
		if err := tx.Usage.Add(ctx, Usage{Folder: "grp", CostUSD: 0.01}); err != nil {
			return err
		}
		var err error
		reply, err = tx.Outbox.Enqueue(ctx, OutboxItem{Chat: "g@g.us", Group: "grp", Text: "hello", Origin: OriginReply})
		return err
	}))
	must(db.Usage.AddAPI(ctx, APIUsage{Folder: "grp", Model: "m", CostUSD: 0.01}))
	must(db.Turns.Add(ctx, TurnEnd{Chat: "g@g.us", Upto: withMedia, Result: "done"}))
	checkPlans(t, db, "agent turn commit")

	// The outbox: due rows, a failed attempt, the send recorded (its text
	// stored as the chat's message), a row that fails for good.
	_, err = db.Outbox.Pending(ctx, 100)
	must(err)
	must(db.Outbox.MarkAttempt(ctx, reply.ID, "timeout"))
	_, err = db.Outbox.Get(ctx, reply.ID)
	must(err)
	must(db.Outbox.MarkSent(ctx, reply.ID, "sent-1", time.Time{}))
	other, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "g@g.us", Text: "notice", Origin: OriginNotice})
	must(err)
	must(db.Outbox.MarkFailed(ctx, other.ID, "gone"))
	// The channel echoes the reply back under the id it reported.
	_, _, err = db.Messages.Insert(ctx, Message{Chat: "g@g.us", ExternalID: "sent-1", Text: "hello", FromMe: true})
	must(err)
	checkPlans(t, db, "outbox due rows and mark sent")

	// A reply or reaction in the main chat that answers one of bridged's
	// notices (an approval request) is looked up by the id it quotes.
	if _, err := db.Approvals.BySentID(ctx, "sent-1"); !errorsIsNotFound(err) {
		t.Fatalf("ApprovalBySentID: %v", err)
	}
	if _, err := db.Notices.BySentID(ctx, "sent-1"); !errorsIsNotFound(err) {
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

// TestPagesUseIndexes runs what the dashboard's pages, /metrics and the
// commands `status`, `why`, `tasks runs` and `approvals` read, and asks
// SQLite for each statement's plan: each reads the rows it shows through an
// index, never a table that grows with history whole.
func TestPagesUseIndexes(t *testing.T) {
	ctx := context.Background()
	db := openRecorded(t)
	addGroup(t, db, "g@g.us", "grp")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	id, _, err := db.Messages.Insert(ctx, Message{Chat: "g@g.us", ExternalID: "in-1", Sender: "s", Text: "@Andy hi"})
	must(err)
	must(db.Turns.Add(ctx, TurnEnd{Chat: "g@g.us", Upto: id, Result: "done"}))
	task, err := db.Tasks.Create(ctx, Task{Folder: "grp", Chat: "g@g.us", Prompt: "p", Kind: TaskOnce, Value: "v"})
	must(err)
	planRec.record(true)
	defer planRec.record(false)
	planRec.take()
	day := t0.Add(-24 * time.Hour)

	// /metrics and `status`.
	_, err = db.Stats(ctx)
	must(err)
	_, err = db.Usage.CostSince(ctx, day)
	must(err)
	_, err = db.Usage.ReportedCostSince(ctx, day)
	must(err)
	_, err = db.Outbox.RecentFailures(ctx, day, 10)
	must(err)
	_, err = db.Tasks.Runs(ctx, task.ID, 3)
	must(err)
	_, err = db.Messages.EverStored(ctx)
	must(err)
	_, err = db.Messages.CountSinceByChat(ctx, day)
	must(err)
	checkPlans(t, db, "status and metrics")

	// The dashboard's overview and a group page.
	for _, chat := range []ChatID{"", "g@g.us"} {
		_, err = db.Messages.ByHour(ctx, chat, day)
		must(err)
		_, err = db.Turns.Latencies(ctx, chat, day, 60)
		must(err)
	}
	_, last, err := db.Messages.ByHourAfter(ctx, 0, day)
	must(err)
	_, _, err = db.Messages.ByHourAfter(ctx, last-1, day)
	must(err)
	_, err = db.Usage.CostByHour(ctx, day)
	must(err)
	_, err = db.Messages.Recent(ctx, "g@g.us", 50)
	must(err)
	_, err = db.Approvals.List(ctx, true, 50)
	must(err)
	checkPlans(t, db, "dashboard")

	// `why last` and `why <id>`.
	for _, chat := range []ChatID{"", "g@g.us"} {
		_, err = db.Messages.LastFrom(ctx, chat)
		must(err)
	}
	_, err = db.Messages.GetStored(ctx, id)
	must(err)
	_, err = db.Turns.From(ctx, "g@g.us", id, 20)
	must(err)
	_, err = db.Budget.DecisionsOn(ctx, "g@g.us", id, 20)
	must(err)
	_, err = db.Budget.Refusals(ctx, "grp", day, t0, 20)
	must(err)
	_, _, _, _, err = db.Usage.APIBetween(ctx, "grp", day, t0)
	must(err)
	_, _, err = db.Messages.NextAfter(ctx, "g@g.us", id)
	must(err)
	_, err = db.Outbox.Between(ctx, "g@g.us", "grp", day, time.Time{}, 20)
	must(err)
	_, err = db.Approvals.Asked(ctx, "grp", day, t0, 20)
	must(err)
	checkPlans(t, db, "why")

	// `tasks runs`, `approvals`.
	_, err = db.Tasks.Runs(ctx, task.ID, 20)
	must(err)
	_, err = db.Approvals.List(ctx, false, 50)
	must(err)
	checkPlans(t, db, "tasks runs and approvals")
}

// TestPruneUsesIndexes: each retention batch finds its rows through an
// index (and sorts none of the rest), so it costs the same however many
// rows are left to prune.
func TestPruneUsesIndexes(t *testing.T) {
	ctx := context.Background()
	db := openRecorded(t)
	addGroup(t, db, "g@g.us", "grp")
	planRec.record(true)
	defer planRec.record(false)
	planRec.take()
	if _, err := db.Prune(ctx, t0, 500); err != nil {
		t.Fatal(err)
	}
	qs := planRec.take()
	for _, q := range qs {
		if !planned(q) {
			continue
		}
		bad, plan := planScans(t, db, q)
		if len(bad) > 0 || strings.Contains(plan, "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("a prune statement reads or sorts more than its batch:\n%s\nplan: %s", q, plan)
		}
	}
	if len(qs) == 0 {
		t.Error("prune: no statement recorded")
	}
}
