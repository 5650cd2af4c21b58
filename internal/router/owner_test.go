package router

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// fakeBudget pauses every group while paused is set and records Spent.
type fakeBudget struct {
	paused atomic.Bool
	spent  chan store.Folder
}

func (b *fakeBudget) Paused(ctx context.Context, g store.Group) bool { return b.paused.Load() }
func (b *fakeBudget) Spent(ctx context.Context, g store.Group)       { b.spent <- g.Folder }

// fakeAlerts records the conditions reported, by a key of its own
// ("gave-up/FOLDER", "outbox-failed/CHAT"), with what was told of them.
type fakeAlerts struct {
	mu     sync.Mutex
	raised map[string]string
	events chan string // "raise KEY" or "clear KEY"
}

func gaveUpKey(folder store.Folder) string     { return "gave-up/" + string(folder) }
func outboxFailedKey(chat store.ChatID) string { return "outbox-failed/" + string(chat) }

func (a *fakeAlerts) GaveUp(ctx context.Context, folder store.Folder, attempts int, why string) {
	a.raise(gaveUpKey(folder), fmt.Sprintf("folder=%s attempts=%d why=%s", folder, attempts, why))
}

func (a *fakeAlerts) Recovered(ctx context.Context, folder store.Folder) { a.clear(gaveUpKey(folder)) }

func (a *fakeAlerts) APIRefused(ctx context.Context, folder store.Folder, label, fix string) {
	a.raise("api-refused/"+label, fmt.Sprintf("folder=%s fix=%s", folder, fix))
}

func (a *fakeAlerts) SendFailed(ctx context.Context, chat store.ChatID, folder store.Folder, why string) {
	a.raise(outboxFailedKey(chat), fmt.Sprintf("folder=%s why=%s", folder, why))
}

func (a *fakeAlerts) Sent(ctx context.Context, chat store.ChatID) { a.clear(outboxFailedKey(chat)) }

func (a *fakeAlerts) TaskPaused(ctx context.Context, t store.Task, why string) {
	a.raise("task-paused/"+string(t.ID), fmt.Sprintf("failures=%d why=%s", t.Failures, why))
}

func (a *fakeAlerts) raise(key, text string) {
	a.mu.Lock()
	a.raised[key] = text
	a.mu.Unlock()
	a.events <- "raise " + key
}

func (a *fakeAlerts) clear(key string) {
	a.mu.Lock()
	_, was := a.raised[key]
	delete(a.raised, key)
	a.mu.Unlock()
	if was {
		a.events <- "clear " + key
	}
}

func nextEvent[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testWait):
		t.Fatalf("no %s within %s", what, testWait)
		var zero T
		return zero
	}
}

// A paused group's messages wait (no container starts) and run once the
// pause lifts and the router looks again; every recorded cost is reported.
func TestBudgetPauseKeepsMessages(t *testing.T) {
	h := newHarness(t, nil)
	b := &fakeBudget{spent: make(chan store.Folder, 10)}
	b.paused.Store(true)
	h.r.budget = b
	h.start()
	h.post(mainChat, "are you there?")
	ctx := context.Background()
	if err := h.r.Ping(ctx); err != nil { // the message loop has looked at it
		t.Fatal(err)
	}
	// Had the loop handed the message on, the queue would hold a run for
	// it by now (it is enqueued before the loop answers the ping).
	if q := h.r.Status().Queue; q.Running != 0 || len(q.Waiting) != 0 || h.rt.starts() != 0 {
		t.Fatalf("queue %+v, %d containers started while paused; want nothing run", q, h.rt.starts())
	}
	b.paused.Store(false)
	h.r.Rescan()
	run := h.nextRun()
	if !strings.Contains(run.spec.Input.Prompt, "are you there?") {
		t.Fatalf("prompt %q: want the message kept during the pause", run.spec.Input.Prompt)
	}
	run.result("yes")
	if got := nextEvent(t, b.spent, "cost report"); got != "main" {
		t.Errorf("spent reported for %q; want main", got)
	}
	if m := h.nextSend(); m.Text != "yes" {
		t.Errorf("sent %q; want the reply", m.Text)
	}
}

// A message that finally fails raises an alert for its chat once; a
// message sent to that chat later clears it.
func TestOutboxFailureAlert(t *testing.T) {
	h := newHarness(t, nil)
	al := &fakeAlerts{raised: map[string]string{}, events: make(chan string, 10)}
	h.r.alerts = al
	var fail atomic.Bool
	fail.Store(true)
	h.ch.FailWith(func(m channel.Outgoing) error {
		if fail.Load() {
			return fmt.Errorf("no such chat: %w", channel.ErrPermanent)
		}
		return nil
	})
	h.start()
	ctx := context.Background()
	if _, err := h.r.SendMessage(ctx, nil, string(famChat), "first", store.OriginTool, "fam"); err != nil {
		t.Fatal(err)
	}
	key := outboxFailedKey(famChat)
	if got := nextEvent(t, al.events, "alert"); got != "raise "+key {
		t.Fatalf("got %q; want raise %s", got, key)
	}
	al.mu.Lock()
	text := al.raised[key]
	al.mu.Unlock()
	if !strings.Contains(text, "folder=fam ") || !strings.Contains(text, "no such chat") {
		t.Errorf("alert text %q: want the group and the reason", text)
	}
	fail.Store(false)
	if _, err := h.r.SendMessage(ctx, nil, string(famChat), "second", store.OriginTool, "fam"); err != nil {
		t.Fatal(err)
	}
	if got := nextEvent(t, al.events, "alert"); got != "clear "+key {
		t.Fatalf("got %q; want clear %s", got, key)
	}
}

// A group that gave up raises an alert for the owner once; its next good
// run clears it.
func TestGaveUpAlert(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RetryDelays = []time.Duration{time.Millisecond} })
	al := &fakeAlerts{raised: map[string]string{}, events: make(chan string, 10)}
	h.r.alerts = al
	h.rt.onStart = func(r *fakeRun) { r.exit(1) }
	h.start()
	h.post(famChat, "@"+testName+" hello")
	key := gaveUpKey("fam")
	if got := nextEvent(t, al.events, "alert"); got != "raise "+key {
		t.Fatalf("got %q; want raise %s", got, key)
	}
	al.mu.Lock()
	text := al.raised[key]
	al.mu.Unlock()
	if !strings.Contains(text, "folder=fam attempts=2 ") {
		t.Errorf("alert text %q: want the group and the attempts", text)
	}
	h.waitIdle("fam")
	h.rt.mu.Lock()
	h.rt.onStart = nil
	h.rt.mu.Unlock()
	h.post(famChat, "@"+testName+" again")
	run := h.nextRun()
	for !strings.Contains(run.spec.Input.Prompt, "again") {
		run = h.nextRun() // skip the failed runs
	}
	run.result("back")
	for m := h.nextSend(); m.Text != "back"; m = h.nextSend() {
	}
	run.exit(0)
	if got := nextEvent(t, al.events, "alert"); got != "clear "+key {
		t.Fatalf("got %q; want clear %s", got, key)
	}
}

// A task of a paused group is skipped: no container, an error run that
// says why.
func TestBudgetPauseSkipsTask(t *testing.T) {
	h := newHarness(t, nil)
	b := &fakeBudget{spent: make(chan store.Folder, 10)}
	b.paused.Store(true)
	h.r.budget = b
	h.start()
	ctx := context.Background()
	task, err := h.db.Tasks.Create(ctx, store.Task{Folder: "fam", Chat: famChat, Prompt: "report", Kind: "once", Value: "2026-01-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	h.r.EnqueueTask(task)
	if m := h.nextSend(); !strings.Contains(m.Text, "budget") {
		t.Errorf("notice %q: want it to name the budget", m.Text)
	}
	h.waitIdle("fam")
	runs, err := h.db.Tasks.Runs(ctx, task.ID, 0)
	if err != nil || len(runs) != 1 || runs[0].Status != store.RunError || !strings.Contains(runs[0].Error, "daily budget is used up") {
		t.Fatalf("task runs: got %+v, %v; want one error run naming the budget", runs, err)
	}
	if n := h.rt.starts(); n != 0 {
		t.Errorf("containers started: %d; want 0", n)
	}
}

// The main group giving up is told once, in the main chat, by its own
// notice: the owner alert would say it a second time in the same chat.
func TestMainGaveUpIsNotAlertedTwice(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RetryDelays = []time.Duration{time.Millisecond} })
	al := &fakeAlerts{raised: map[string]string{}, events: make(chan string, 10)}
	h.r.alerts = al
	h.rt.onStart = func(r *fakeRun) { r.exit(1) }
	h.start()
	h.post(mainChat, "hello")
	for m := h.nextSend(); !strings.Contains(m.Text, "could not answer"); m = h.nextSend() {
	}
	h.waitIdle("main")
	// Another group giving up is still alerted: the first alert seen must
	// be that one, not one for main.
	h.post(famChat, "@"+testName+" hello")
	if got := nextEvent(t, al.events, "alert"); got != "raise "+gaveUpKey("fam") {
		t.Fatalf("got %q; want raise %s and none for main", got, gaveUpKey("fam"))
	}
}

// The budget's decision on waiting messages is recorded as it is made, with
// the budget and the day's spending of that moment, once per change: a
// paused group looked at again adds nothing, a raise that lets the messages
// through adds the release.
func TestBudgetDecisionRecordedWhenMade(t *testing.T) {
	h := newHarness(t, nil)
	b := &fakeBudget{spent: make(chan store.Folder, 10)}
	b.paused.Store(true)
	h.r.budget = b
	h.change("main", func(g *store.Group) { g.ContainerConfig.BudgetDailyUSD = 2 })
	ctx := context.Background()
	if err := h.db.Usage.AddAPI(ctx, store.APIUsage{Folder: "main", At: time.Now(), Model: "claude-opus-4-5", CostUSD: 2.5}); err != nil {
		t.Fatal(err)
	}
	h.start()
	first := h.post(mainChat, "are you there?")
	if err := h.r.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	h.r.Rescan() // looked at again, still paused
	if err := h.r.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	h.change("main", func(g *store.Group) { g.ContainerConfig.BudgetDailyUSD = 10 })
	b.paused.Store(false)
	h.r.Rescan()
	run := h.nextRun()
	ds, err := h.db.Budget.DecisionsOn(ctx, mainChat, first, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Verdict != store.BudgetPaused || ds[0].BudgetUSD != 2 || ds[0].SpentUSD != 2.5 ||
		ds[1].Verdict != store.BudgetAdmitted || ds[1].BudgetUSD != 10 || ds[1].SpentUSD != 2.5 || ds[1].Upto != first {
		t.Fatalf("decisions %+v; want paused at $2.5 of $2, then admitted at $2.5 of $10", ds)
	}
	run.result("yes")
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
}
