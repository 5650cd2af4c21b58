package router

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ping is one Ping with a short deadline.
func ping(r *Router) error {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	return r.Ping(ctx)
}

// The watchdog's probe: the message loop answers while it runs, not before
// Run and not while it is stuck on a group, and again once it is free.
func TestPingFollowsTheMessageLoop(t *testing.T) {
	h := newHarness(t, nil)
	if err := ping(h.r); !errors.Is(err, ErrNotAnswering) {
		t.Fatalf("Ping before Run: got %v; want ErrNotAnswering", err)
	}
	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := h.r.Ping(ctx); err != nil {
		t.Fatalf("Ping of a running router: %v", err)
	}

	// Wedge the loop: it blocks on main's lock with the next message.
	gs := h.r.runs.Group("main")
	gs.Lock()
	locked := true
	defer func() {
		if locked {
			gs.Unlock()
		}
	}()
	h.post(mainChat, "hello")
	// The loop may answer a ping or two before it takes the message.
	deadline := time.Now().Add(testWait)
	for ping(h.r) == nil {
		if time.Now().After(deadline) {
			t.Fatal("Ping still answered with the message loop stuck on a group's lock")
		}
	}
	for i := range 3 {
		if err := ping(h.r); !errors.Is(err, ErrNotAnswering) {
			t.Fatalf("Ping %d of a wedged loop: got %v; want ErrNotAnswering", i, err)
		}
	}
	gs.Unlock()
	locked = false
	if err := h.r.Ping(ctx); err != nil {
		t.Fatalf("Ping once the loop is free again: %v", err)
	}
	h.nextRun().result("hi")
}
