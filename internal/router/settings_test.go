package router

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// change applies fn to folder's stored group, as `groups set` does.
func (h *harness) change(folder store.Folder, fn func(*store.Group)) {
	h.t.Helper()
	ctx := context.Background()
	g, err := h.db.Groups.ByFolder(ctx, folder)
	if err != nil {
		h.t.Fatal(err)
	}
	fn(&g)
	if err := h.db.Groups.Update(ctx, g); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) apply(folder store.Folder) agentrun.Applied {
	h.t.Helper()
	a, err := h.r.ApplySettings(context.Background(), folder)
	if err != nil {
		h.t.Fatalf("apply settings: %v", err)
	}
	return a
}

func (h *harness) pendingMessages(folder string) bool {
	for _, g := range h.r.Status().Queue.Groups {
		if g.Group == folder {
			return g.PendingMessages
		}
	}
	return false
}

// A tool profile changed while the agent works on a turn reaches it when
// the turn ends: the message sent meanwhile is not piped into the old
// container, which is closed after its result, and starts the next one
// with the new profile.
func TestSettingsChangeAppliesWhenTheTurnEnds(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(mainChat, "first")
	run := h.nextRun()
	closeFile := filepath.Join(h.inputDir("main"), ipc.CloseName)

	h.change("main", func(g *store.Group) { g.Tools = store.ToolsReadOnly })
	if a := h.apply("main"); a != agentrun.AppliesAtTurnEnd {
		t.Fatalf("apply during a turn = %q; want %q", a, agentrun.AppliesAtTurnEnd)
	}
	if fileExists(closeFile) {
		t.Fatal("the container was closed in the middle of its turn")
	}
	h.post(mainChat, "second")
	pollUntil(t, func() bool { return h.pendingMessages("main") }, "the second message waiting for the next container")
	if names := jsonFiles(t, h.inputDir("main")); len(names) != 0 {
		t.Fatalf("piped into the container started with the old profile: %q", names)
	}

	run.result("answer one")
	h.nextSend()
	waitFile(t, closeFile)
	run.exit(0)
	next := h.nextRun()
	if next.spec.Input.Tools != string(store.ToolsReadOnly) || !strings.Contains(next.spec.Input.Prompt, ">second</message>") {
		t.Fatalf("next container: tools %q, prompt %q; want read-only with the second message", next.spec.Input.Tools, next.spec.Input.Prompt)
	}
	next.result("answer two")
	h.nextSend()
	next.exit(0)
	h.waitIdle("main")
	if a := h.apply("main"); a != agentrun.AppliesNext {
		t.Fatalf("apply with no container = %q; want %q", a, agentrun.AppliesNext)
	}
}

// An idle container is closed at once by a change of what it was started
// with; a change the daemon reads live (the budget, the trigger) leaves it
// running.
func TestSettingsChangeStopsAnIdleAgent(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(mainChat, "first")
	run := h.nextRun()
	run.result("answer")
	h.nextSend()
	pollUntil(t, func() bool {
		st := h.r.Status().Queue.Groups
		return len(st) == 1 && st[0].Idle
	}, "the agent idle")
	closeFile := filepath.Join(h.inputDir("main"), ipc.CloseName)

	h.change("main", func(g *store.Group) { g.ContainerConfig.BudgetDailyUSD = 5; g.Trigger = "@Other" })
	if a := h.apply("main"); a != agentrun.AppliesNext || fileExists(closeFile) {
		t.Fatalf("apply of a budget and trigger = %q, closed %v; want %q and the agent left running", a, fileExists(closeFile), agentrun.AppliesNext)
	}
	h.change("main", func(g *store.Group) { g.ContainerConfig.Model = "opus" })
	if a := h.apply("main"); a != agentrun.AppliedStopped || !fileExists(closeFile) {
		t.Fatalf("apply of a model = %q, closed %v; want %q and the close sentinel written", a, fileExists(closeFile), agentrun.AppliedStopped)
	}
	run.exit(0)
	h.waitIdle("main")
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("containers started: %d; want 1 (nothing waits)", n)
	}
}

// budgetSeen records the budget each Spent was told.
type budgetSeen struct{ budgets chan float64 }

func (b budgetSeen) Paused(context.Context, store.Group) bool { return false }
func (b budgetSeen) Spent(_ context.Context, g store.Group) {
	b.budgets <- g.ContainerConfig.BudgetDailyUSD
}

// The budget notice after a turn uses the budget as it is now, not the one
// the container started with.
func TestSpentSeesTheBudgetAsItIsNow(t *testing.T) {
	h := newHarness(t, nil)
	seen := budgetSeen{budgets: make(chan float64, 4)}
	h.r.budget = seen
	h.change("main", func(g *store.Group) { g.ContainerConfig.BudgetDailyUSD = 1 })
	h.start()
	h.post(mainChat, "first")
	run := h.nextRun()
	h.change("main", func(g *store.Group) { g.ContainerConfig.BudgetDailyUSD = 3 })
	run.result("answer")
	if got := nextEvent(t, seen.budgets, "budget check"); got != 3 {
		t.Errorf("Spent was told a budget of %v; want 3 (raised during the turn)", got)
	}
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
}

// Which other groups' folders main sees is a mount of each: a change of it
// stops the idle main agent, and the next container gets the new mounts.
func TestSeesChangeStopsTheIdleMainAgent(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.db.Groups.Add(context.Background(), store.Group{Chat: "local:family", Folder: "family", Trigger: "@Andy", RequiresTrigger: true}); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.post(mainChat, "first")
	run := h.nextRun()
	run.result("answer")
	h.nextSend()
	pollUntil(t, func() bool {
		st := h.r.Status().Queue.Groups
		return len(st) == 1 && st[0].Idle
	}, "the agent idle")
	closeFile := filepath.Join(h.inputDir("main"), ipc.CloseName)
	seesFamily := func(spec container.Spec) bool {
		return slices.ContainsFunc(spec.Mounts, func(m container.Mount) bool { return m.Target == container.ContainerGroupsDir+"/family" })
	}
	if seesFamily(run.spec) {
		t.Fatalf("a new main group's container mounts family's folder: %+v", run.spec.Mounts)
	}

	h.change("main", func(g *store.Group) { g.Sees = store.Sees{Folders: []store.Folder{"family"}} })
	if a := h.apply("main"); a != agentrun.AppliedStopped || !fileExists(closeFile) {
		t.Fatalf("apply of --sees family = %q, closed %v; want %q and the close sentinel written", a, fileExists(closeFile), agentrun.AppliedStopped)
	}
	run.exit(0)
	h.waitIdle("main")
	h.post(mainChat, "second")
	next := h.nextRun()
	if !seesFamily(next.spec) {
		t.Errorf("the next main container's mounts %+v; want family's folder at %s/family", next.spec.Mounts, container.ContainerGroupsDir)
	}
	next.result("answer two")
	h.nextSend()
	next.exit(0)
	h.waitIdle("main")
}
