package store

import (
	"context"
	"testing"
	"time"
)

// A turn's latency tells the part its group's approvals waited for the
// owner; the story finds the approvals asked in a turn's time.
func TestApprovalWaits(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	clock := t0
	db.now = func() time.Time { return clock }
	if _, err := db.Groups.Add(ctx, Group{Chat: "local:a", Folder: "a", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	id, _, err := db.Messages.Insert(ctx, Message{Chat: "local:a", ExternalID: "1", Text: "do it", SentAt: clock})
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Second)
	if err := db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.Approvals.Add(ctx, Approval{ID: "abcd", Folder: "a", RequestID: "r1", Tool: "Bash", Subject: "touch x", Rule: "Bash(touch x)"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(7 * time.Minute)
	if err := db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.Approvals.Decide(ctx, "abcd", true, false, "cli")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(3 * time.Second)
	if err := db.Turns.Add(ctx, TurnEnd{Chat: "local:a", Upto: id, Result: "done"}); err != nil {
		t.Fatal(err)
	}
	ls, err := db.Turns.Latencies(ctx, "local:a", t0.Add(-time.Hour), 10)
	if err != nil || len(ls) != 1 {
		t.Fatalf("latencies: %+v %v; want the one turn", ls, err)
	}
	if got, want := ls[0].Latency, 7*time.Minute+5*time.Second; got != want {
		t.Errorf("latency %s; want %s", got, want)
	}
	if got, want := ls[0].Approval, 7*time.Minute; got != want {
		t.Errorf("approval wait %s; want %s", got, want)
	}
	as, err := db.Approvals.Asked(ctx, "a", t0, clock, 10)
	if err != nil || len(as) != 1 || as[0].ID != "abcd" || as[0].DecidedBy != "cli" {
		t.Fatalf("approvals asked in the turn: %+v %v; want abcd, decided by cli", as, err)
	}
	if as, err := db.Approvals.Asked(ctx, "a", clock, time.Time{}, 10); err != nil || len(as) != 0 {
		t.Errorf("approvals asked after the turn: %+v %v; want none", as, err)
	}
}
