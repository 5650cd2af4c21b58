package router

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// waitEnd waits for the end of the turn of mainChat that took message after,
// later than the end numbered since.
func waitEnd(t *testing.T, hub *turns.Hub, after int64, since uint64) turns.End {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, ok := hub.Wait(ctx, string(mainChat), after, since)
	if !ok {
		t.Fatalf("no end of the turn that took #%d", after)
	}
	return e
}

// hubHarness is a started harness (one retry) whose router and runner tell
// a turns hub.
func hubHarness(t *testing.T) (*harness, *turns.Hub) {
	t.Helper()
	h := newHarness(t, nil)
	hub := turns.New(nil, nil)
	h.r.turns, h.r.runs.Turns = hub, hub
	h.start()
	return h, hub
}

// The turns hub hears a turn that answered as soon as its reply is
// committed (the container stays up), and a failing turn on each failed
// attempt with its reason, then when the router gives up.
func TestTurnEndsReachTheHub(t *testing.T) {
	h, hub := hubHarness(t)

	first := h.post(mainChat, "first")
	run := h.nextRun()
	run.result("answer one")
	if e := waitEnd(t, hub, int64(first), 0); e.Result != turns.Done || e.Upto < int64(first) {
		t.Fatalf("first turn ended %+v; want done, up to #%d", e, first)
	}
	if got := h.nextSend(); got.Text != "answer one" {
		t.Fatalf("sent %q; want the first answer", got.Text)
	}

	second := h.post(mainChat, "second")
	consume(t, h.inputDir("main"), waitInputs(t, h.inputDir("main"), 1))
	run.emit(ipc.Event{Type: ipc.EventResult, IsError: true, Text: "API Error: overloaded"})
	run.exit(0)
	e := waitEnd(t, hub, int64(second), 0)
	if e.Result != turns.Failed || e.Attempt != 1 || e.Attempts != 2 || !strings.Contains(e.Reason, "overloaded") {
		t.Fatalf("second turn ended %+v; want failed, attempt 1 of 2, with the API error", e)
	}
	retry := h.nextRun()
	retry.emit(ipc.Event{Type: ipc.EventResult, IsError: true, Text: "API Error: still overloaded"})
	retry.exit(0)
	e = waitEnd(t, hub, int64(second), e.Seq)
	if e.Result != turns.GaveUp || !strings.Contains(e.Reason, "still overloaded") {
		t.Fatalf("retry ended %+v; want gave up with the API error", e)
	}
}

// A turn that fails after the agent's own message answered what it was
// handed is not run again, yet it failed: the hub hears it gave up, with
// the reason, and the chat is told; a turn whose container ends badly after
// its answer lost nothing and ends well.
func TestTurnFailedAfterItsOwnMessageIsReported(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(run *fakeRun)
		want string
	}{
		{"error result", func(run *fakeRun) {
			run.emit(ipc.Event{Type: ipc.EventResult, IsError: true, Text: "API Error: overloaded"})
			run.exit(0)
		}, "overloaded"},
		{"container dies mid-turn", func(run *fakeRun) { run.exit(1) }, "code 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, hub := hubHarness(t)
			id := h.post(mainChat, "do it")
			run := h.nextRun()
			if _, err := h.r.SendMessage(context.Background(), nil, string(mainChat), "on it", store.OriginTool, "main"); err != nil {
				t.Fatal(err)
			}
			if got := h.nextSend(); got.Text != "on it" {
				t.Fatalf("sent %q; want the agent's own message", got.Text)
			}
			tt.end(run)
			e := waitEnd(t, hub, int64(id), 0)
			if e.Result != turns.GaveUp || !strings.Contains(e.Reason, tt.want) {
				t.Fatalf("turn ended %+v; want gave up with %q", e, tt.want)
			}
			if got := h.nextSend(); !strings.Contains(got.Text, "could not finish my answer") {
				t.Fatalf("chat told %q; want the unfinished-answer notice", got.Text)
			}
			h.waitIdle("main")
			if n := h.rt.starts(); n != 1 {
				t.Fatalf("containers started = %d; want 1 (the answered message is not run again)", n)
			}
		})
	}

	h, hub := hubHarness(t)
	id := h.post(mainChat, "hi")
	run := h.nextRun()
	run.result("hello")
	h.nextSend()
	run.exit(1) // after its answer: nothing lost
	h.waitIdle("main")
	if e := waitEnd(t, hub, int64(id), 0); e.Result != turns.Done {
		t.Fatalf("turn ended %+v; want done", e)
	}
	if sent := h.ch.SentTexts(); len(sent) != 1 {
		t.Fatalf("sent %q; want only the answer", sent)
	}
}
