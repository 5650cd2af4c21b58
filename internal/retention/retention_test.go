package retention

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// With a real database and a fake clock: a pass prunes the answered
// messages older than the retention in batches, keeps the newer ones, and
// prunes those too once the clock has moved past them.
func TestPassPrunesOldAnsweredMessages(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Name: "main", Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	insert := func(n int, at time.Time) store.MessageID {
		var last store.MessageID
		for i := range n {
			id, _, err := db.Messages.Insert(ctx, store.Message{Chat: "local:main", ExternalID: fmt.Sprint(at.Unix(), "-", i), Sender: "a", Text: "hi", SentAt: at})
			if err != nil {
				t.Fatal(err)
			}
			last = id
		}
		return last
	}
	insert(1200, t0.Add(-100*24*time.Hour))
	last := insert(10, t0.Add(-10*24*time.Hour))
	if err := db.Sessions.SetCursor(ctx, "main", last); err != nil {
		t.Fatal(err)
	}

	now := t0
	var prunes []store.Pruned
	p := &Pruner{DB: recorder{db, &prunes}, Keep: 90 * 24 * time.Hour, Now: func() time.Time { return now }, Pause: time.Millisecond}
	n, err := p.Pass(ctx)
	if err != nil || n.Messages != 1200 {
		t.Fatalf("Pass = %+v, %v; want 1200 messages", n, err)
	}
	if len(prunes) < 1200/DefaultBatch+1 || prunes[0].Messages != FirstBatch {
		t.Errorf("batches = %+v; want the first of %d, none over %d", prunes, FirstBatch, DefaultBatch)
	}
	for _, b := range prunes {
		if b.Messages > DefaultBatch {
			t.Errorf("a batch of %d messages; want at most %d", b.Messages, DefaultBatch)
		}
	}
	left, _ := db.Messages.After(ctx, "local:main", 0, 0)
	if len(left) != 10 {
		t.Errorf("%d messages left; want the 10 within the retention", len(left))
	}
	now = t0.Add(81 * 24 * time.Hour)
	if n, err := p.Pass(ctx); err != nil || n.Messages != 10 {
		t.Errorf("Pass 81 days later = %+v, %v; want the 10 others", n, err)
	}
}

// recorder records each batch.
type recorder struct {
	db  *store.DB
	out *[]store.Pruned
}

func (r recorder) Prune(ctx context.Context, before time.Time, limit int) (store.Pruned, error) {
	n, err := r.db.Prune(ctx, before, limit)
	*r.out = append(*r.out, n)
	return n, err
}

// fakeStore has rows left to prune and records when and up to when it was
// asked.
type fakeStore struct {
	mu    sync.Mutex
	left  int
	calls []call
}

type call struct{ at, before time.Time }

func (f *fakeStore) Prune(_ context.Context, before time.Time, limit int) (store.Pruned, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{time.Now(), before})
	n := min(f.left, limit)
	f.left -= n
	return store.Pruned{Outbox: n}, nil
}

func (f *fakeStore) snapshot() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// Run: the first pass a minute after the start, then hourly; a pass with
// more than a batch to do pauses between batches; nothing with a retention
// of 0; Run returns when its context ends.
func TestRunSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := &fakeStore{left: 3*FirstBatch + FirstBatch/2}
		p := &Pruner{DB: f, Keep: 48 * time.Hour, Log: zerolog.Nop()}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()

		time.Sleep(2*time.Hour + 2*time.Minute)
		synctest.Wait()
		calls := f.snapshot()
		// First pass: two full batches (the first, then twice as many:
		// the fake holds the writer no time) and half of the first, with
		// pauses; then one call an hour.
		offsets := []time.Duration{time.Minute, time.Minute + DefaultPause, time.Minute + 2*DefaultPause,
			time.Hour + time.Minute + 2*DefaultPause, 2*time.Hour + time.Minute + 2*DefaultPause}
		if len(calls) != len(offsets) {
			t.Fatalf("%d Prune calls in 2h2m; want %d", len(calls), len(offsets))
		}
		for i, c := range calls {
			if got := c.at.Sub(start); got != offsets[i] {
				t.Errorf("call %d at +%s; want +%s", i, got, offsets[i])
			}
			// One cut per pass: the pass's start minus the retention.
			passStart := c.at
			if i == 1 || i == 2 {
				passStart = calls[0].at
			}
			if got := passStart.Sub(c.before); got != 48*time.Hour {
				t.Errorf("call %d prunes before the pass's start - %s; want - 48h", i, got)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v; want nil", err)
		}

		off := &fakeStore{left: 10}
		if err := (&Pruner{DB: off, Log: zerolog.Nop()}).Run(context.Background()); err != nil || len(off.snapshot()) != 0 {
			t.Errorf("retention 0: Run = %v with %d prunes; want nil and none", err, len(off.snapshot()))
		}
	})
}

// heldStore has rows left to prune; each batch holds the writer for the
// time perRow says a row costs at that batch (the store's clock, scripted),
// and it records the limit each batch was asked with.
type heldStore struct {
	left   int
	perRow func(batch int) time.Duration
	limits []int
	held   []time.Duration
}

func (h *heldStore) Prune(_ context.Context, _ time.Time, limit int) (store.Pruned, error) {
	n := min(h.left, limit)
	h.left -= n
	held := time.Duration(n) * h.perRow(len(h.limits))
	h.limits, h.held = append(h.limits, limit), append(h.held, held)
	return store.Pruned{Outbox: n, Held: held}, nil
}

// A pass sizes each batch by the time the one before held the writer: it
// starts at FirstBatch, halves after a batch over Hold (a cold cache, a
// loaded machine), doubles after one under half of Hold, never over Batch;
// so after the first batch at a new cost a batch holds the writer at most
// Hold.
func TestPassSizesBatchesByHold(t *testing.T) {
	const ms = time.Millisecond
	// A row costs 2 ms for the first 3 batches (pages read cold), then
	// 40 µs, then 200 µs from batch 12 on (a loaded machine).
	h := &heldStore{left: 2000, perRow: func(i int) time.Duration {
		switch {
		case i < 3:
			return 2 * ms
		case i < 12:
			return 40 * time.Microsecond
		}
		return 200 * time.Microsecond
	}}
	p := &Pruner{DB: h, Keep: 48 * time.Hour, Pause: time.Nanosecond, Log: zerolog.Nop()}
	if _, err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 10 rows held 20 ms (> 10): halve; 5 rows 10 ms (not over, not under
	// 5): keep; then 40 µs a row: double up to the most; at 200 µs a row
	// 100 rows hold 20 ms: halve to 50 (10 ms), which stays.
	want := []int{10, 5, 5, 5, 10, 20, 40, 80, 100, 100, 100, 100, 100, 50, 50, 50}
	if len(h.limits) < len(want) || !slices.Equal(h.limits[:len(want)], want) {
		t.Errorf("batch limits = %v; want %v…", h.limits, want)
	}
	for i, d := range h.held {
		if d > DefaultHold && i != 0 && i != 12 {
			t.Errorf("batch %d held the writer %s; want at most %s after the first at a new cost", i, d, DefaultHold)
		}
	}
}

// The rule alone: over hold halves, under half of it doubles, in between
// keeps; never under 1 nor over the most.
func TestBatchSizeAfter(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		n    int
		held time.Duration
		want int
	}{
		{10, 11 * ms, 5}, {10, 10 * ms, 10}, {10, 5 * ms, 10}, {10, 4999 * time.Microsecond, 20},
		{1, 50 * ms, 1}, {80, 0, 100}, {100, 1 * ms, 100}, {100, 40 * ms, 50},
	} {
		b := batchSize{n: c.n, max: 100, hold: 10 * ms}
		b.after(c.held)
		if b.n != c.want {
			t.Errorf("%d rows after %s: next %d; want %d", c.n, c.held, b.n, c.want)
		}
	}
	if b := newBatchSize(4, DefaultHold); b.n != 4 {
		t.Errorf("first batch with a most of 4: %d; want 4", b.n)
	}
}

// The spooled copies of files sent with messages go once they are older
// than the retention and their message is no longer pending; a crash's
// staging leftovers go too.
func TestPassPrunesSentFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := storetest.OpenHome(t, dir)
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	spool := hm.Spool()
	now := time.Now()
	old := now.Add(-100 * time.Hour)
	oldSent := spoolCopy(t, db, hm, "old-sent", true, old)
	oldPending := spoolCopy(t, db, hm, "old-pending", false, old)
	newSent := spoolCopy(t, db, hm, "new-sent", true, now)
	leftover := filepath.Join(hm.Layout().SpoolDir(), ".stage-0123")
	if err := os.Mkdir(leftover, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}

	p := &Pruner{DB: db, Files: spool, Outbox: db.Outbox, Keep: 48 * time.Hour, Now: func() time.Time { return now }, Log: zerolog.Nop()}
	if _, err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{oldSent: false, oldPending: true, newSent: true} {
		if _, ok, err := spool.Get(key); ok != want || err != nil {
			t.Errorf("%s kept = %v (%v); want %v", key, ok, err, want)
		}
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("staging leftover still there: %v", err)
	}
}

// A crash between a file's send and the removal of its copy leaves the copy
// behind: a pass removes it an hour later, long before the retention, while
// the copy of a message still pending (to be sent again under the same id)
// and a copy kept within the hour stay.
func TestPassRemovesCopiesACrashLeft(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := storetest.OpenHome(t, dir)
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	spool := hm.Spool()
	now := time.Now()
	left := spoolCopy(t, db, hm, "sent-then-crashed", true, now.Add(-2*time.Hour))
	pending := spoolCopy(t, db, hm, "still-pending", false, now.Add(-2*time.Hour))
	recent := spoolCopy(t, db, hm, "just-sent", true, now.Add(-10*time.Minute))

	p := &Pruner{DB: db, Files: spool, Outbox: db.Outbox, Keep: 90 * 24 * time.Hour, Now: func() time.Time { return now }, Log: zerolog.Nop()}
	if _, err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{left: false, pending: true, recent: true} {
		if _, ok, err := spool.Get(key); ok != want || err != nil {
			t.Errorf("%s kept = %v (%v); want %v", key, ok, err, want)
		}
	}
}

// Run logs (data/logs/<folder>/), inbox files (groups/<folder>/inbox/) and
// the files delivered to local chats (data/local/) go once older than their
// retentions; newer ones stay, and what the agent made in its inbox other than files (a
// directory, a link) is left alone, as is a workspace without an inbox.
func TestPassPrunesRunLogsAndInboxes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := hm.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	file := func(rel string, age time.Duration) string {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	day := 24 * time.Hour
	oldLog := file("data/logs/family/run-20260801T100000.000Z.log", 40*day)
	newLog := file("data/logs/family/run-20261120T100000.000Z.log", 5*day)
	oldMainLog := file("data/logs/main/run-20260701T100000.000Z.log", 100*day)
	otherFile := file("data/logs/main/notes.txt", 100*day)
	oldPhoto := file("groups/family/inbox/photo.jpg", 100*day)
	newPhoto := file("groups/family/inbox/voice.ogg", 10*day)
	oldMain := file("groups/main/inbox/doc.pdf", 95*day)
	kept := file("groups/family/kept.txt", 200*day)
	agentDir := filepath.Join(dir, "groups", "family", "inbox", "album")
	if err := os.Mkdir(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	albumPhoto := file("groups/family/inbox/album/old.jpg", 200*day)
	if err := os.Symlink(kept, filepath.Join(dir, "groups", "family", "inbox", "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "groups", "work"), 0o755); err != nil {
		t.Fatal(err)
	}

	oldLocal := filepath.Dir(file("data/local/3EB0AA/chart.png", 100*day))
	newLocal := filepath.Dir(file("data/local/3EB0BB/chart.png", day))
	for dir, age := range map[string]time.Duration{oldLocal: 100 * day, newLocal: day} {
		if err := os.Chtimes(dir, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}

	p := &Pruner{DB: fakeNoRows{}, Trees: hm, LogKeep: 30 * day, InboxKeep: 90 * day, Keep: 60 * day, Now: func() time.Time { return now }, Log: zerolog.Nop()}
	if _, err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		oldLog: false, newLog: true, oldMainLog: false, otherFile: true,
		oldPhoto: false, newPhoto: true, oldMain: false, kept: true, albumPhoto: true,
		filepath.Join(dir, "groups", "family", "inbox", "link.txt"): true,
		oldLocal: false, newLocal: true,
	} {
		_, err := os.Lstat(path)
		if got := err == nil; got != want {
			t.Errorf("%s kept = %v; want %v", strings.TrimPrefix(path, dir), got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "groups", "work", "inbox")); !os.IsNotExist(err) {
		t.Errorf("a workspace without an inbox was given one (%v)", err)
	}
}

// fakeNoRows is a store with nothing to prune.
type fakeNoRows struct{}

func (fakeNoRows) Prune(context.Context, time.Time, int) (store.Pruned, error) {
	return store.Pruned{}, nil
}

// spoolCopy queues an outbox message whose copy is kept in hm's spool with
// its modification time at at, marked sent at at when sent is set, and
// returns the copy's key.
func spoolCopy(t *testing.T, db *store.DB, hm *home.Home, text string, sent bool, at time.Time) string {
	t.Helper()
	ctx := context.Background()
	spool := hm.Spool()
	it, err := db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: "local:main", Text: text, Origin: store.OriginTool})
	if err != nil {
		t.Fatal(err)
	}
	st, err := spool.Stage(text+".txt", "text/plain", "document", strings.NewReader(text), 100)
	if err != nil {
		t.Fatal(err)
	}
	key := home.SpoolKey(int64(it.ID), it.ExternalID)
	if err := st.Keep(key); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(hm.Layout().SpoolDir(), key), at, at); err != nil {
		t.Fatal(err)
	}
	if sent {
		if err := db.Outbox.MarkSent(ctx, it.ID, "", at); err != nil {
			t.Fatal(err)
		}
	}
	return key
}

// Session transcripts (data/sessions/<folder>/.claude/**.jsonl) go with the
// retention, but never the session the group resumes next (its transcript
// and its subagents'); the agent owns the tree, so nothing it planted is
// followed: a link is left, and what it points to.
func TestPassPrunesOldTranscripts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := hm.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	const live = "5f1c7d2e-0000-4000-8000-00000000aaaa"
	if err := db.Sessions.Set(ctx, store.Session{Folder: "family", SessionID: live, LastUUID: "u1"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	day := 24 * time.Hour
	file := func(path string, age time.Duration) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(`{"type":"user"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-age)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		return path
	}
	proj := filepath.Join(dir, "data", "sessions", "family", ".claude", "projects", "-workspace-group")
	oldSession := file(filepath.Join(proj, "0d9a0000-0000-4000-8000-000000000001.jsonl"), 100*day)
	oldSubagent := file(filepath.Join(proj, "0d9a0000-0000-4000-8000-000000000001", "subagents", "agent-a1.jsonl"), 100*day)
	liveSession := file(filepath.Join(proj, live+".jsonl"), 200*day)
	liveSubagent := file(filepath.Join(proj, live, "subagents", "agent-b2.jsonl"), 200*day)
	recent := file(filepath.Join(proj, "0d9a0000-0000-4000-8000-000000000002.jsonl"), 5*day)
	settings := file(filepath.Join(dir, "data", "sessions", "family", ".claude", "settings.json"), 300*day)
	mainOld := file(filepath.Join(dir, "data", "sessions", "main", ".claude", "projects", "-workspace-group", "0d9a0000-0000-4000-8000-000000000003.jsonl"), 100*day)
	// Planted by the agent: a link to a file outside, named as a
	// transcript, and a link to a directory outside that holds one.
	outside := t.TempDir()
	outFile := file(filepath.Join(outside, "precious.jsonl"), 300*day)
	outInDir := file(filepath.Join(outside, "dir", "old.jsonl"), 300*day)
	linkFile := filepath.Join(proj, "planted.jsonl")
	if err := os.Symlink(outFile, linkFile); err != nil {
		t.Fatal(err)
	}
	linkDir := filepath.Join(proj, "planted-dir")
	if err := os.Symlink(filepath.Join(outside, "dir"), linkDir); err != nil {
		t.Fatal(err)
	}

	p := &Pruner{DB: db, Trees: hm, Sessions: db.Sessions, Keep: 60 * day, Now: func() time.Time { return now }, Log: zerolog.Nop()}
	if _, err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		oldSession: false, oldSubagent: false, mainOld: false,
		liveSession: true, liveSubagent: true, recent: true, settings: true,
		linkFile: true, linkDir: true, outFile: true, outInDir: true,
	} {
		_, err := os.Lstat(path)
		if got := err == nil; got != want {
			t.Errorf("%s kept = %v; want %v", path, got, want)
		}
	}
	// A retention of 0 keeps every transcript.
	again := file(filepath.Join(proj, "0d9a0000-0000-4000-8000-000000000004.jsonl"), 100*day)
	p.Keep = 0
	if _, err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(again); err != nil {
		t.Errorf("a retention of 0 removed a transcript: %v", err)
	}
}

// fakeChanges records the cut-off each pass prunes changes at.
type fakeChanges struct{ befores []time.Time }

func (f *fakeChanges) Prune(_ context.Context, before time.Time) (int, int, error) {
	f.befores = append(f.befores, before)
	return 1, 2, nil
}

// A pass prunes the records of what turns changed at the retention, like
// the rows; a retention of 0 keeps them.
func TestPassPrunesChangesAtTheRetention(t *testing.T) {
	ch := &fakeChanges{}
	p := &Pruner{DB: storetest.Open(t), Keep: 72 * time.Hour, Changes: ch, Now: func() time.Time { return t0 }, Log: zerolog.Nop()}
	if _, err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(ch.befores) != 1 || !ch.befores[0].Equal(t0.Add(-72*time.Hour)) {
		t.Fatalf("changes pruned before %v; want once, at %v", ch.befores, t0.Add(-72*time.Hour))
	}
	p.Keep = 0
	if _, err := p.Pass(context.Background()); err != nil || len(ch.befores) != 1 {
		t.Fatalf("retention 0: pruned %v, %v; want nothing", ch.befores, err)
	}
}

// checkpointStore is a heldStore that can checkpoint: it records, in one
// list, each batch ("b") and each checkpoint ("c").
type checkpointStore struct {
	heldStore
	log []string
}

func (c *checkpointStore) Prune(ctx context.Context, before time.Time, limit int) (store.Pruned, error) {
	c.log = append(c.log, "b")
	return c.heldStore.Prune(ctx, before, limit)
}

func (c *checkpointStore) Checkpoint(context.Context) (int, error) {
	c.log = append(c.log, "c")
	return 0, nil
}

// A store that can checkpoint is checkpointed after each batch but the
// last, so no commit of a batch finds a long write-ahead log to copy.
func TestPassCheckpointsBetweenBatches(t *testing.T) {
	c := &checkpointStore{heldStore: heldStore{left: 25, perRow: func(int) time.Duration { return 0 }}}
	p := &Pruner{DB: c, Keep: 48 * time.Hour, Pause: time.Nanosecond, Log: zerolog.Nop()}
	if _, err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 10, then 15 of 20: two batches.
	if got := strings.Join(c.log, ""); got != "bcb" {
		t.Errorf("batches and checkpoints = %q; want \"bcb\"", got)
	}
}
