package turns

import (
	"context"
	"testing"
	"time"
)

func TestWaitFindsTheTurnThatTookTheMessage(t *testing.T) {
	h := New(nil, nil)
	h.Ended(End{Chat: "local:a", Result: Done, Upto: 4})
	h.Ended(End{Chat: "local:b", Result: Done, Upto: 9})
	h.Ended(End{Chat: "local:a", Result: Failed, Upto: 7, Reason: "boom", Attempt: 1, Attempts: 3})
	h.Ended(End{Chat: "local:a", Result: Done, Upto: 7})

	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	tests := []struct {
		name   string
		chat   string
		after  int64
		since  uint64
		ok     bool
		result Result
		seq    uint64
	}{
		{"an older turn", "local:a", 3, 0, true, Done, 1},
		{"skips turns that ended before the message", "local:a", 5, 0, true, Failed, 3},
		{"a later end than the failure", "local:a", 5, 3, true, Done, 4},
		{"the other chat's turn is not ours", "local:b", 10, 0, false, "", 0},
		{"not yet", "local:a", 8, 0, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := h.Wait(ctx, tt.chat, tt.after, tt.since)
			if ok != tt.ok || e.Result != tt.result || e.Seq != tt.seq {
				t.Errorf("got %v %q seq %d; want %v %q seq %d", ok, e.Result, e.Seq, tt.ok, tt.result, tt.seq)
			}
		})
	}
}

func TestWaitWakesWhenTheTurnEnds(t *testing.T) {
	h := New(nil, nil)
	got := make(chan End, 1)
	go func() {
		e, _ := h.Wait(context.Background(), "local:a", 5, 0)
		got <- e
	}()
	h.Ended(End{Chat: "local:a", Result: Done, Upto: 4}) // an earlier turn: keeps waiting
	h.Ended(End{Chat: "local:a", Result: GaveUp, Upto: 6, Reason: "crashed"})
	select {
	case e := <-got:
		if e.Result != GaveUp || e.Reason != "crashed" || e.At.IsZero() {
			t.Errorf("got %+v; want the gave-up end with its reason and time", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return when the turn ended")
	}
}

func TestHubKeepsOnlyRecentEnds(t *testing.T) {
	h := New(nil, nil)
	for i := range 3 * keep {
		h.Ended(End{Chat: "local:a", Result: Done, Upto: int64(i)})
	}
	if n := len(h.ends["local:a"]); n != keep {
		t.Errorf("kept %d ends; want %d", n, keep)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if e, ok := h.Wait(ctx, "local:a", 0, 0); !ok || e.Upto != 2*keep {
		t.Errorf("got %+v, %v; want the oldest kept end (upto %d)", e, ok, 2*keep)
	}
	var nilHub *Hub
	nilHub.Ended(End{Chat: "local:a"})
	if _, ok := nilHub.Wait(context.Background(), "local:a", 0, 0); ok {
		t.Error("a nil hub reported an end")
	}
}
