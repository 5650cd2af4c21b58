package scheduler

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// tellingQueue is a fakeQueue that is also a NotRunTeller.
type tellingQueue struct {
	*fakeQueue
	mu   sync.Mutex
	told []string
}

func (q *tellingQueue) TaskNotRun(t store.Task, why string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.told = append(q.told, string(t.ID)+": "+why)
}

// A task whose prompt main set runs while main is full; once main is not,
// it is paused at its claim instead of queued, its next run kept, its last
// result saying why, and the owner is told once. A task its own group set
// runs on.
func TestTaskSetByAGroupNoLongerFullIsPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		due := base.Add(time.Minute)
		byMain := h.addTask("family", store.TaskCron, "*/10 * * * *", &due)
		byMain.PromptBy = "main"
		own := h.addTask("family", store.TaskCron, "*/10 * * * *", &due)
		own.PromptBy = "family"
		for _, tk := range []store.Task{byMain, own} {
			if err := h.db.Tasks.Update(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		q := &tellingQueue{fakeQueue: &fakeQueue{now: h.now, db: h.db}}
		h.fake = q.fakeQueue
		h.start(q, 0)
		h.advance(base.Add(5 * time.Minute))
		if n := len(h.fake.calls()); n != 2 {
			t.Fatalf("%d runs while main is full; want both tasks run", n)
		}

		g, err := h.db.Groups.ByFolder(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		g.Tools = store.ToolsReadOnly
		if err := h.db.Groups.Update(ctx, g); err != nil {
			t.Fatal(err)
		}
		h.advance(base.Add(15 * time.Minute))
		var ran []store.TaskID
		for _, c := range h.fake.calls()[2:] {
			ran = append(ran, c.task.ID)
		}
		if len(ran) != 1 || ran[0] != own.ID {
			t.Errorf("after main became read-only, ran %v; want only the group's own task", ran)
		}
		got := h.task(byMain.ID)
		if got.Status != store.TaskPaused || !strings.Contains(got.LastResult, "profile is now read-only") || got.NextRun == nil {
			t.Errorf("main's task is %s, %q, next %v; want paused saying why, its next run kept", got.Status, got.LastResult, got.NextRun)
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if len(q.told) != 1 || !strings.HasPrefix(q.told[0], string(byMain.ID)+": ") {
			t.Errorf("the owner was told %q; want once, of main's task", q.told)
		}
	})
}
