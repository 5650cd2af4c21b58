package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// rows is the number of rows of table matching where.
func rows(t *testing.T, db *DB, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := db.read.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table+` WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Prune removes, in batches, only old rows nothing needs: messages behind
// the stored cursor, sent and failed outbox rows, finished task runs and
// usage rows (folded into days first). It leaves messages after a cursor, of
// a chat without one or of a removed group, pending outbox rows, running
// task runs, and everything newer than the cut.
func TestPrune(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	old := t0.Add(-100 * 24 * time.Hour)
	cut := t0.Add(-90 * 24 * time.Hour)
	for _, g := range []Group{
		{Chat: "local:main", Name: "main", Folder: "main", IsMain: true},
		{Chat: "local:fam", Name: "fam", Folder: "fam"},    // no cursor yet
		{Chat: "local:gone", Name: "gone", Folder: "gone"}, // removed below
	} {
		if _, err := db.Groups.Add(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	msg := func(chat ChatID, at time.Time) MessageID {
		t.Helper()
		id, _, err := db.Messages.Insert(ctx, Message{Chat: chat, ExternalID: fmt.Sprint(at.UnixNano(), chat), Sender: "a", Text: "hi", SentAt: at})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	var mainIDs []MessageID
	for i := range 7 {
		mainIDs = append(mainIDs, msg("local:main", old.Add(time.Duration(i)*time.Minute)))
	}
	recent := msg("local:main", t0.Add(-time.Hour))
	// The cursor is at the 6th old message: the 7th is still pending.
	if err := db.Sessions.SetCursor(ctx, "main", mainIDs[5]); err != nil {
		t.Fatal(err)
	}
	msg("local:fam", old)
	msg("local:gone", old)
	if err := db.Sessions.SetCursor(ctx, "gone", 1000); err != nil {
		t.Fatal(err)
	}
	if err := db.Groups.Remove(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	// Outbox: old sent, old failed, old pending, recent sent.
	var outIDs []OutboxID
	for range 4 {
		it, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "local:main", Text: "x", Origin: OriginReply})
		if err != nil {
			t.Fatal(err)
		}
		outIDs = append(outIDs, it.ID)
	}
	if err := db.Outbox.MarkSent(ctx, outIDs[0], "s0", old); err != nil {
		t.Fatal(err)
	}
	db.now = func() time.Time { return old }
	if err := db.Outbox.MarkFailed(ctx, outIDs[1], "gave up"); err != nil {
		t.Fatal(err)
	}
	db.now = func() time.Time { return t0 }
	if err := db.Outbox.MarkSent(ctx, outIDs[3], "s3", t0); err != nil {
		t.Fatal(err)
	}

	// Task runs: two old finished ones, an old running one, a recent one.
	task, err := db.Tasks.Create(ctx, Task{Folder: "main", Chat: "local:main", Prompt: "p", Kind: "cron", Value: "v"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		at     time.Time
		status string
	}{{old, "ok"}, {old, "error"}, {old, "running"}, {t0, "ok"}} {
		if _, err := db.write.ExecContext(ctx, `INSERT INTO task_runs (task_id, started_at, duration_ms, status) VALUES (?, ?, 1, ?)`,
			task.ID, toMS(r.at), r.status); err != nil {
			t.Fatal(err)
		}
	}

	// Usage: three old turns over two days and two groups, one recent.
	day1 := time.Date(2026, 8, 1, 23, 0, 0, 0, time.UTC)
	for _, u := range []Usage{
		{Folder: "main", CostUSD: 0.5, InputTokens: 10, OutputTokens: 1, NumTurns: 2, At: day1},
		{Folder: "main", CostUSD: 0.25, InputTokens: 5, OutputTokens: 2, NumTurns: 1, At: day1.Add(90 * time.Minute)},
		{Folder: "fam", CostUSD: 1, InputTokens: 1, OutputTokens: 1, NumTurns: 1, At: day1},
		{Folder: "main", CostUSD: 2, At: t0},
	} {
		if err := db.Usage.Add(ctx, u); err != nil {
			t.Fatal(err)
		}
	}

	// Batches of 2: the first batch takes 2 of each kind that has them.
	p, err := db.Prune(ctx, cut, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Held <= 0 {
		t.Errorf("first batch held the writer %s; want its time", p.Held)
	}
	if want := (Pruned{Messages: 2, Outbox: 2, TaskRuns: 2, Usage: 2, Held: p.Held}); p != want {
		t.Errorf("first batch pruned %+v; want %+v", p, want)
	}
	total := p
	for p.Total() > 0 {
		if p, err = db.Prune(ctx, cut, 2); err != nil {
			t.Fatal(err)
		}
		total = total.Add(p)
	}
	if want := (Pruned{Messages: 6, Outbox: 2, TaskRuns: 2, Usage: 3, Held: total.Held}); total != want {
		t.Errorf("pruned in all %+v; want %+v", total, want)
	}

	if n := rows(t, db, "messages", "chat = 'local:main' AND id <= ?", mainIDs[5]); n != 0 {
		t.Errorf("%d messages behind main's cursor left", n)
	}
	for what, id := range map[string]MessageID{"the message after the cursor": mainIDs[6], "the recent message": recent} {
		if rows(t, db, "messages", "id = ?", id) != 1 {
			t.Errorf("%s was pruned", what)
		}
	}
	for _, chat := range []string{"local:fam", "local:gone"} {
		if rows(t, db, "messages", "chat = ?", chat) != 1 {
			t.Errorf("the message of %s (no cursor, or group removed) was pruned", chat)
		}
	}
	if n := rows(t, db, "outbox", "state = 'pending'"); n != 1 {
		t.Errorf("pending outbox rows left: %d; want 1", n)
	}
	if n := rows(t, db, "outbox", "id = ?", outIDs[3]); n != 1 {
		t.Error("the recent sent outbox row was pruned")
	}
	if n := rows(t, db, "task_runs", "status = 'running'"); n != 1 {
		t.Error("the running task run was pruned")
	}
	if n := rows(t, db, "task_runs", "started_at = ?", toMS(t0)); n != 1 {
		t.Error("the recent task run was pruned")
	}

	days, err := db.Usage.ByDay(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []DailyUsage{
		{Folder: "fam", Day: "2026-08-01", Turns: 1, CostUSD: 1, InputTokens: 1, OutputTokens: 1, NumTurns: 1},
		{Folder: "main", Day: "2026-08-01", Turns: 1, CostUSD: 0.5, InputTokens: 10, OutputTokens: 1, NumTurns: 2},
		{Folder: "main", Day: "2026-08-02", Turns: 1, CostUSD: 0.25, InputTokens: 5, OutputTokens: 2, NumTurns: 1},
	}
	if fmt.Sprint(days) != fmt.Sprint(want) {
		t.Errorf("usage by day = %+v; want %+v", days, want)
	}
	if cost, _ := db.Usage.ReportedCostSince(ctx, t0.Add(-time.Hour)); cost != 2 {
		t.Errorf("cost of the recent turn = %v; want 2 (recent usage is kept raw)", cost)
	}
	// Folding again adds to the day rather than replacing it.
	if err := db.Usage.Add(ctx, Usage{Folder: "fam", CostUSD: 2, InputTokens: 1, At: day1.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Prune(ctx, cut, 10); err != nil {
		t.Fatal(err)
	}
	days, _ = db.Usage.ByDay(ctx)
	if days[0].Turns != 2 || days[0].CostUSD != 3 || days[0].InputTokens != 2 {
		t.Errorf("fam's day after a second fold = %+v; want 2 turns, $3, 2 input tokens", days[0])
	}

	if size, err := db.Size(ctx); err != nil || size < 4096 {
		t.Errorf("Size = %d, %v; want the file's pages", size, err)
	}
}

// Checkpoint empties the write-ahead log beside the writer: the next write
// starts the log over (its header's checkpoint sequence goes up by one),
// which a log left as it was (under SQLite's 1,000 pages) would not.
func TestCheckpointEmptiesTheLog(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "local:a", "a")
	var path string
	if err := db.read.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	round := func() uint32 {
		t.Helper()
		h := make([]byte, 16)
		f, err := os.Open(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := io.ReadFull(f, h); err != nil {
			t.Fatal(err)
		}
		return binary.BigEndian.Uint32(h[12:])
	}
	write := func(i int) {
		t.Helper()
		if _, _, err := db.Messages.Insert(ctx, Message{Chat: "local:a", ExternalID: fmt.Sprint("c", i), Sender: "a", Text: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	r0 := round()
	write(2)
	if r := round(); r != r0 {
		t.Fatalf("the log started over without a checkpoint (%d → %d)", r0, r)
	}
	if n, err := db.Checkpoint(ctx); err != nil || n == 0 {
		t.Fatalf("Checkpoint = %d, %v; want the pages the log held", n, err)
	}
	write(3)
	if r := round(); r != r0+1 {
		t.Errorf("after Checkpoint the log's round is %d; want %d (started over)", r, r0+1)
	}
}

// A prune batch's commit never checkpoints the write-ahead log (the copy
// would hold every writer behind it): even one that finds the log past
// SQLite's 1,000 pages leaves it for the pass's checkpoint beside the
// writer; the next other commit checkpoints as SQLite does.
func TestPruneCommitDoesNotCheckpoint(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "local:a", "a")
	var path string
	if err := db.read.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	// The log index: frames in the log, and how many a checkpoint copied.
	index := func() (frames, backfill uint32) {
		t.Helper()
		b, err := os.ReadFile(path + "-shm")
		if err != nil || len(b) < 100 {
			t.Fatalf("read the log index: %v (%d bytes)", err, len(b))
		}
		return binary.NativeEndian.Uint32(b[16:]), binary.NativeEndian.Uint32(b[96:])
	}
	old := time.Now().Add(-48 * time.Hour).UnixMilli()
	// A log of over 1,000 pages that no commit checkpointed: old usage
	// rows to prune, and pages of padding.
	err := db.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.stx.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
			return err
		}
		for i := range 50 {
			if _, err := tx.stx.ExecContext(ctx, `INSERT INTO api_usage (folder, at, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd)
				VALUES ('a', ?, 'm', 1, 1, 0, 0, 0.01)`, old+int64(i)); err != nil {
				return err
			}
		}
		for i := range 1100 {
			if _, err := tx.stx.ExecContext(ctx, `INSERT INTO chats (id, name, channel, is_group, last_activity) VALUES (?, ?, 'local', 1, 0)`,
				fmt.Sprintf("local:pad%d", i), strings.Repeat("x", 3000)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 1000`); err != nil {
		t.Fatal(err)
	}
	frames, back := index()
	if frames < 1000 || back != 0 {
		t.Fatalf("log index %d frames, %d copied; want over 1,000, none copied", frames, back)
	}
	n, err := db.Prune(ctx, time.Now().Add(-time.Hour), 10)
	if err != nil || n.Usage != 10 {
		t.Fatalf("Prune = %+v, %v; want 10 usage rows", n, err)
	}
	if _, back := index(); back != 0 {
		t.Fatalf("the prune's commit copied %d frames of the log into the database; want none (the writer held meanwhile)", back)
	}
	// Any other commit checkpoints as before.
	if _, _, err := db.Messages.Insert(ctx, Message{Chat: "local:a", ExternalID: "after", Sender: "a", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, back := index(); back == 0 {
		t.Error("the next commit did not checkpoint the long log: the prune left SQLite's automatic checkpoint off")
	}
}
