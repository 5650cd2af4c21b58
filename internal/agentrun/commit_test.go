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

// fakeQueue answers Idle as told and records nothing else.
type fakeQueue struct{ idle bool }

func (q *fakeQueue) MarkClosing(string)     {}
func (q *fakeQueue) NotifyIdle(string)      {}
func (q *fakeQueue) Idle(string) bool       { return q.idle }
func (q *fakeQueue) EnqueueMessages(string) {}

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
	c, err := db.GetCursor(context.Background(), folder)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A message of the agent to its own chat stores the cursor of the turn in
// flight, not of messages piped while it was busy; one to another chat, or
// after a failed turn, stores none.
func TestSendStoresTheTurnsCursor(t *testing.T) {
	x, db := newRunner(t)
	ctx := context.Background()
	var grp Group
	grp.Lock()
	if err := grp.Load(ctx, db, "fam"); err != nil {
		t.Fatal(err)
	}
	run := x.BeginMessages(&grp, "fam", "local:fam", 5)
	grp.Pipe("in-1.json", 7, false) // the agent is busy: not its turn yet
	grp.Unlock()

	if _, err := x.Send(ctx, &grp, store.OutboxItem{Chat: "local:other", Group: "fam", Text: "elsewhere", Origin: store.OriginTool}); err != nil {
		t.Fatal(err)
	}
	if got := cursor(t, db, "fam"); got != 0 {
		t.Fatalf("cursor after a message to another chat: got %d; want 0", got)
	}
	if _, err := x.Send(ctx, &grp, store.OutboxItem{Chat: "local:fam", Group: "fam", Text: "hi", Origin: store.OriginTool}); err != nil {
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
	grp.Pipe("in-2.json", 9, true)
	grp.Unlock()
	if _, err := x.Send(ctx, &grp, store.OutboxItem{Chat: "local:fam", Group: "fam", Text: "late", Origin: store.OriginTool}); err != nil {
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
	var grp Group
	grp.Lock()
	if err := grp.Load(ctx, db, "fam"); err != nil {
		t.Fatal(err)
	}
	run := x.BeginMessages(&grp, "fam", "local:fam", 4)
	grp.Unlock()

	commitIn := func(ok bool) func(func(context.Context, *store.Tx) error) bool {
		return func(commit func(context.Context, *store.Tx) error) bool {
			if err := db.Tx(ctx, func(tx *store.Tx) error { return commit(ctx, tx) }); err != nil {
				t.Fatal(err)
			}
			return ok
		}
	}
	x.Action(ctx, &grp, "fam", commitIn(false))
	if got := cursor(t, db, "fam"); got != 0 {
		t.Fatalf("cursor after an undone action: got %d; want 0 put back", got)
	}
	x.Action(ctx, &grp, "fam", commitIn(true))
	if got := cursor(t, db, "fam"); got != 4 || !run.acted {
		t.Fatalf("cursor after an action: got %d (acted %v); want 4, acted", got, run.acted)
	}
}
