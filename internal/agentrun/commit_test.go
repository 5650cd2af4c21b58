package agentrun

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// fakeQueue records nothing.
type fakeQueue struct{}

func (q *fakeQueue) EnqueueMessages(string) {}

// fakeQueueRun is a run's queue object that records nothing and never
// wants its slot back.
type fakeQueueRun struct{}

func (r *fakeQueueRun) MarkIdle() bool { return false }
func (r *fakeQueueRun) MarkBusy()      {}
func (r *fakeQueueRun) MarkClosing()   {}

func newRunner(t *testing.T) (*Runner, *store.DB) {
	t.Helper()
	dir := t.TempDir()
	db := storetest.OpenAt(t, filepath.Join(dir, "bridged.db"))
	hm, err := home.New(filepath.Join(dir, "home"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Timezone: time.UTC}, Deps{Store: db, Home: hm, Queue: &fakeQueue{}, Log: zerolog.Nop(), Now: time.Now}), db
}

func cursor(t *testing.T, db *store.DB, folder store.Folder) store.MessageID {
	t.Helper()
	c, err := db.Sessions.Cursor(context.Background(), folder)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// beginFam loads fam's run state and begins a message run in local:fam
// whose turn has been handed the messages up to upto.
func beginFam(t *testing.T, x *Runner, db *store.DB, upto store.MessageID) (*Group, *Run) {
	t.Helper()
	grp := &Group{}
	grp.Lock()
	defer grp.Unlock()
	if err := grp.Load(context.Background(), db, "fam"); err != nil {
		t.Fatal(err)
	}
	return grp, x.BeginMessages(grp, &fakeQueueRun{}, store.Group{Folder: "fam", Chat: "local:fam"}, upto)
}

// A message of the agent to its own chat stores the cursor of the turn in
// flight, not of messages piped while it was busy; one to another chat, or
// after a failed turn, stores none.
func TestSendStoresTheTurnsCursor(t *testing.T) {
	x, db := newRunner(t)
	ctx := context.Background()
	grp, run := beginFam(t, x, db, 5)
	grp.Lock()
	grp.pipe("in-1.json", 7) // the agent is busy: not its turn yet
	grp.Unlock()

	if _, err := x.Send(ctx, grp, store.OutboxItem{Chat: "local:other", Group: "fam", Text: "elsewhere", Origin: store.OriginTool}, nil); err != nil {
		t.Fatal(err)
	}
	if got := cursor(t, db, "fam"); got != 0 {
		t.Fatalf("cursor after a message to another chat: got %d; want 0", got)
	}
	if _, err := x.Send(ctx, grp, store.OutboxItem{Chat: "local:fam", Group: "fam", Text: "hi", Origin: store.OriginTool}, nil); err != nil {
		t.Fatal(err)
	}
	if got := cursor(t, db, "fam"); got != 5 {
		t.Fatalf("cursor after a message to its chat: got %d; want 5 (not the busy pipe's 7)", got)
	}
	if c := x.Containers(); len(c) != 1 || !c[0].Replied || c[0].Kind != "messages" {
		t.Fatalf("containers %+v; want fam's run, replied", c)
	}

	grp.Lock()
	run.broken = errors.New("turn failed")
	grp.Unlock()
	grp.Lock()
	run.waiting = true
	grp.pipe("in-2.json", 9)
	grp.Unlock()
	if _, err := x.Send(ctx, grp, store.OutboxItem{Chat: "local:fam", Group: "fam", Text: "late", Origin: store.OriginTool}, nil); err != nil {
		t.Fatal(err)
	}
	if got := cursor(t, db, "fam"); got != 5 {
		t.Fatalf("cursor after a failed turn: got %d; want 5 kept", got)
	}
}

// An action stores the turn's cursor with it; an action that was undone
// puts the stored cursor back.
func TestActionStoresOrPutsBackTheCursor(t *testing.T) {
	x, db := newRunner(t)
	ctx := context.Background()
	grp, run := beginFam(t, x, db, 4)

	commitIn := func(ok bool) {
		h := x.Hold(grp, "fam")
		defer h.Release(ctx, ok)
		if err := db.Tx(ctx, func(tx *store.Tx) error { return h.Apply(ctx, tx) }); err != nil {
			t.Fatal(err)
		}
	}
	commitIn(false)
	if got := cursor(t, db, "fam"); got != 0 {
		t.Fatalf("cursor after an undone action: got %d; want 0 put back", got)
	}
	commitIn(true)
	if got := cursor(t, db, "fam"); got != 4 || !run.acted {
		t.Fatalf("cursor after an action: got %d (acted %v); want 4, acted", got, run.acted)
	}
}

// unitFunc is a store.Unit made of a function.
type unitFunc func(ctx context.Context, tx *store.Tx, it store.OutboxItem) error

func (f unitFunc) Apply(ctx context.Context, tx *store.Tx, it store.OutboxItem) error {
	return f(ctx, tx, it)
}

// The unit Send is given commits with the row, in its transaction, after the
// insert: its error rolls back the row and the turn's cursor with it.
func TestSendAppliesTheUnit(t *testing.T) {
	x, db := newRunner(t)
	ctx := context.Background()
	grp, _ := beginFam(t, x, db, 5)
	item := store.OutboxItem{Chat: "local:fam", Group: "fam", Text: "hi", Origin: store.OriginTool}

	errBoom := errors.New("boom")
	var seen store.OutboxItem
	failing := unitFunc(func(_ context.Context, _ *store.Tx, it store.OutboxItem) error { seen = it; return errBoom })
	if _, err := x.Send(ctx, grp, item, failing); !errors.Is(err, errBoom) {
		t.Fatalf("Send with a failing unit = %v; want boom", err)
	}
	if seen.ID == 0 || seen.Text != "hi" {
		t.Errorf("unit saw %+v; want the stored row", seen)
	}
	if rows, err := db.Outbox.Pending(ctx, 0); err != nil || len(rows) != 0 {
		t.Fatalf("outbox after the unit failed: %d rows, %v; want none", len(rows), err)
	}
	if got := cursor(t, db, "fam"); got != 0 {
		t.Fatalf("cursor after the unit failed: got %d; want 0", got)
	}

	recording := unitFunc(func(ctx context.Context, tx *store.Tx, it store.OutboxItem) error {
		return tx.Requests.Record(ctx, store.HandledRequest{Folder: it.Group, ID: "r1", Type: "send_message", Response: []byte(`{"outbox_id":1}`)})
	})
	if _, err := x.Send(ctx, grp, item, recording); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Requests.Get(ctx, "fam", "r1"); err != nil {
		t.Errorf("record: %v; want it committed with the row", err)
	}
	if got := cursor(t, db, "fam"); got != 5 {
		t.Errorf("cursor: got %d; want 5", got)
	}
	// Recording the same request again fails the send: no second row.
	if _, err := x.Send(ctx, grp, item, recording); !errors.Is(err, store.ErrExists) {
		t.Errorf("second send of r1 = %v; want ErrExists", err)
	}
	if rows, err := db.Outbox.Pending(ctx, 0); err != nil || len(rows) != 1 {
		t.Errorf("outbox: %d rows, %v; want 1", len(rows), err)
	}
}
