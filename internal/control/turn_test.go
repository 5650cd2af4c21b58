package control

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

type turnResult struct {
	turn Turn
	err  error
}

func (h *harness) turnAsync(after int64, since uint64, wait time.Duration) <-chan turnResult {
	res := make(chan turnResult, 1)
	go func() {
		t, err := h.client.Turn(context.Background(), "local:main", after, since, wait)
		res <- turnResult{t, err}
	}()
	return res
}

func texts(ms []ChatMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

// The turn endpoint answers once the turn that took the message ended and
// every reply it committed is in the chat: a progress message sent during
// the turn and the final reply, not the user's own message.
func TestTurnAnswersWithEveryReplyOnceDelivered(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	id, err := h.client.PostMessage(ctx, "local:main", "alice", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.local.Send(ctx, channel.Outgoing{Chat: "local:main", Text: "working on it", ID: "3EB0PROGRESS"}); err != nil {
		t.Fatal(err)
	}
	row, err := h.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: "local:main", Group: "main", Text: "hi alice", Origin: store.OriginReply})
	if err != nil {
		t.Fatal(err)
	}
	h.turns.Ended(turns.End{Chat: "local:other", Result: turns.Done, Upto: id}) // another chat
	h.turns.Ended(turns.End{Chat: "local:main", Result: turns.Done, Upto: id - 1})
	drain(h.local.waiting)
	res := h.turnAsync(id, 0, 30*time.Second)
	h.turns.Ended(turns.End{Chat: "local:main", Result: turns.Done, Upto: id})
	select {
	case <-h.local.waiting: // the turn ended; the reply is not delivered yet
	case r := <-res:
		t.Fatalf("answered before the reply was delivered: %+v, %v", r.turn, r.err)
	}
	if _, err := h.local.Send(ctx, channel.Outgoing{Chat: "local:main", Text: row.Text, ID: row.ExternalID}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		got := texts(r.turn.Replies)
		if r.err != nil || r.turn.State != TurnDone || !r.turn.Ended() || len(got) != 2 || got[0] != "working on it" || got[1] != "hi alice" {
			t.Fatalf("got %+v (replies %q), %v; want done with both replies", r.turn, got, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s of the reply's delivery")
	}
}

// A failed turn that is retried answers with its reason; asking again after
// it gets the next end (here, giving up); with no end the wait passes and the
// turn is still running.
func TestTurnFailedThenGaveUp(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	id, err := h.client.PostMessage(ctx, "local:main", "alice", "hello")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := h.client.Turn(ctx, "local:main", id, 0, time.Millisecond)
	if err != nil || tr.State != TurnRunning || len(tr.Replies) != 0 {
		t.Fatalf("before any end got %+v, %v; want running with no replies", tr, err)
	}
	h.turns.Ended(turns.End{Chat: "local:main", Result: turns.Failed, Upto: id, Reason: "claude crashed", Attempt: 1, Attempts: 2})
	tr, err = h.client.Turn(ctx, "local:main", id, 0, 30*time.Second)
	if err != nil || tr.State != TurnFailed || tr.Ended() || tr.Error != "claude crashed" || tr.Attempt != 1 || tr.Attempts != 2 {
		t.Fatalf("got %+v, %v; want failed (attempt 1 of 2) with the reason", tr, err)
	}
	res := h.turnAsync(id, tr.Seq, 30*time.Second)
	h.turns.Ended(turns.End{Chat: "local:main", Result: turns.GaveUp, Upto: id, Reason: "claude crashed again", Attempt: 2})
	select {
	case r := <-res:
		if r.err != nil || r.turn.State != TurnGaveUp || !r.turn.Ended() || r.turn.Error != "claude crashed again" {
			t.Fatalf("got %+v, %v; want gave up with the reason", r.turn, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s of giving up")
	}
	if _, err := h.client.Turn(ctx, "local:main", 0, 0, 0); err == nil {
		t.Error("after=0 accepted; want an error")
	}
}

// fixedHolds holds every message of every chat with hold.
type fixedHolds struct{ hold turns.Hold }

func (f fixedHolds) Held(context.Context, string, int64) (turns.Hold, bool, error) {
	return f.hold, true, nil
}

// A held turn's kind is its state, and reason says why for a person: the
// answer is pinned here, and docs/control-api.md shows it as it is.
func TestHeldTurnAnswer(t *testing.T) {
	doc, err := os.ReadFile("../../docs/control-api.md")
	if err != nil {
		t.Fatal(err)
	}
	until := time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		hold turns.Hold
		want string
	}{
		{turns.Hold{Kind: turns.HoldNotTriggered, Reason: "not triggered (needs @Andy)"},
			`{"state":"not_triggered","reason":"not triggered (needs @Andy)","replies":[]}`},
		{turns.Hold{Kind: turns.HoldBudgetPaused, Until: until, Reason: "paused by its budget until 2026-05-02 00:00 UTC (or until the owner raises it)"},
			`{"state":"budget_paused","reason":"paused by its budget until 2026-05-02 00:00 UTC (or until the owner raises it)","until":"2026-05-02T00:00:00Z","replies":[]}`},
		{turns.Hold{Kind: turns.HoldQueued, Behind: 2, Reason: "queued behind 7: all 5 container slots are busy, 2 other groups wait before it"},
			`{"state":"queued","reason":"queued behind 7: all 5 container slots are busy, 2 other groups wait before it","behind":2,"replies":[]}`},
	} {
		h := startWith(t, Live{}, func(o *Options) { o.Holds = fixedHolds{c.hold} })
		h.addMain(t)
		ctx := context.Background()
		id, err := h.client.PostMessage(ctx, "local:main", "alice", "hello")
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if err := h.client.do(ctx, "GET", fmt.Sprintf("/v1/chats/local:main/turn?after=%d&wait=5s", id), nil, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw) != c.want {
			t.Errorf("%s: answered %s; want %s", c.hold.Kind, raw, c.want)
		}
		turn, err := h.client.Turn(ctx, "local:main", id, 0, 5*time.Second)
		if err != nil || string(turn.State) != c.hold.Kind || turn.Reason != c.hold.Reason {
			t.Errorf("%s: the client read %+v, %v; want the kind in State, the line in Reason", c.hold.Kind, turn, err)
		}
		if c.hold.Kind == turns.HoldNotTriggered && !strings.Contains(string(doc), "`"+c.want+"`") {
			t.Errorf("docs/control-api.md does not show the answer for %s: `%s`", c.hold.Kind, c.want)
		}
	}
}
