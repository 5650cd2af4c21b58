package router

import (
	"context"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/store"
)

func (a *fakeAlerts) TaskNotRun(ctx context.Context, t store.Task, why string) {
	a.raise("task-not-run/"+string(t.ID), why)
}

// A task main set, queued for another group, does not run when main is
// no longer full as its run starts (its profile changed while the task
// waited): no container, an error run that says why, the task paused, the
// owner alerted, and nothing told to the group's own chat.
func TestTaskSetByAGroupNoLongerFullDoesNotRun(t *testing.T) {
	h := newHarness(t, nil)
	al := &fakeAlerts{raised: map[string]string{}, events: make(chan string, 10)}
	h.r.alerts = al
	h.start()
	ctx := context.Background()
	g, err := h.db.Groups.ByFolder(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	g.Tools = store.ToolsReadOnly
	if err := h.db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	task, err := h.db.Tasks.Create(ctx, store.Task{Folder: "fam", Chat: famChat, Prompt: "touch x", Kind: "once",
		Value: "2026-01-01T00:00:00Z", PromptBy: "main"})
	if err != nil {
		t.Fatal(err)
	}
	h.r.EnqueueTask(task)
	if got := nextEvent(t, al.events, "alert"); got != "raise task-not-run/"+string(task.ID) {
		t.Fatalf("got %q; want the owner told the task was not run", got)
	}
	h.waitIdle("fam")
	if n := h.rt.starts(); n != 0 {
		t.Errorf("containers started: %d; want 0", n)
	}
	got, err := h.db.Tasks.Get(ctx, task.ID)
	if err != nil || got.Status != store.TaskPaused || !strings.Contains(got.LastResult, "profile is now read-only") {
		t.Errorf("task %+v (%v); want it paused, saying why", got, err)
	}
	runs, err := h.db.Tasks.Runs(ctx, task.ID, 0)
	if err != nil || len(runs) != 1 || runs[0].Status != store.RunError || !strings.Contains(runs[0].Error, "not full") {
		t.Errorf("task runs %+v (%v); want one error run saying why", runs, err)
	}
	if out, err := h.db.Outbox.Pending(ctx, 0); err != nil || len(out) != 0 {
		t.Errorf("outbox %+v (%v); want nothing told to the group's chat", out, err)
	}
}
