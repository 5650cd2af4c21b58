package agentrun

import (
	"testing"

	"github.com/bridged-app/bridged/internal/store"
)

// A batch handed to the run object starts the next container only while
// the cursor is where it was read from; it is taken once, and a newer batch
// replaces an older one.
func TestBatchTakenOnceAtItsCursor(t *testing.T) {
	var g Group
	g.Lock()
	defer g.Unlock()
	if _, ok := g.Take(); ok {
		t.Fatal("Take without a batch = ok")
	}
	g.Offer(Batch{After: 0, Msgs: []store.Message{{ID: 1}}})
	g.Offer(Batch{After: 0, Msgs: []store.Message{{ID: 1}, {ID: 2}}})
	b, ok := g.Take()
	if !ok || len(b.Msgs) != 2 {
		t.Fatalf("Take = %+v, %v; want the newer batch of 2", b, ok)
	}
	if _, ok := g.Take(); ok {
		t.Fatal("a batch was taken twice")
	}
	g.Offer(Batch{After: 0, Msgs: []store.Message{{ID: 3}}})
	g.handed = 2 // messages were handed over since the read
	if _, ok := g.Take(); ok {
		t.Fatal("a batch read after another cursor was taken")
	}
	g.Offer(Batch{After: 2, Msgs: []store.Message{{ID: 3}}})
	g.Drop()
	if _, ok := g.Take(); ok {
		t.Fatal("a dropped batch was taken")
	}
}

// Hold needs a live run; its release is idempotent, and the run is held
// while any hold is.
func TestHoldCountsUntilReleased(t *testing.T) {
	var g Group
	g.Lock()
	if _, ok := g.Hold(); ok {
		t.Fatal("Hold without a live run = ok")
	}
	run := &Run{kick: make(chan struct{}, 1)}
	g.run = run
	r1, ok1 := g.Hold()
	r2, ok2 := g.Hold()
	g.Unlock()
	if !ok1 || !ok2 || run.held.Load() != 2 {
		t.Fatalf("two holds: ok %v %v, held %d; want 2", ok1, ok2, run.held.Load())
	}
	r1()
	r1()
	if got := run.held.Load(); got != 1 {
		t.Fatalf("held after one release (twice) = %d; want 1", got)
	}
	r2()
	if got := run.held.Load(); got != 0 {
		t.Fatalf("held after both releases = %d; want 0", got)
	}
	select {
	case <-run.kick:
	default:
		t.Fatal("a release did not restart the hard timeout")
	}
}
