package approvals

import (
	"context"
	"testing"
	"time"
)

// Changed wakes its callers when a request opens and when it is settled,
// and not otherwise.
func TestChangedWakesOnOpenAndSettle(t *testing.T) {
	s, _, p := setup(t, time.Hour)
	woke := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	opened := s.Changed()
	if woke(opened) {
		t.Fatal("Changed is closed before any change")
	}
	id, _, done := ask(t, s, p, "r1", "rm -rf build")
	if !woke(opened) {
		t.Error("Changed not closed when the request opened")
	}
	settled := s.Changed()
	if woke(settled) {
		t.Fatal("a fresh Changed is closed with nothing changed since")
	}
	if _, err := s.Decide(context.Background(), id, true, false, "cli"); err != nil {
		t.Fatal(err)
	}
	wait(t, done)
	if !woke(settled) {
		t.Error("Changed not closed when the request was settled")
	}
}
