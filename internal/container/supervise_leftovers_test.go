package container

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// countingRuntime starts containers that end at once, as told, and counts
// the engine's list calls.
type countingRuntime struct {
	mu       sync.Mutex
	lists    int
	starts   int
	startErr error // the next start fails with it
	exitErr  error // the next container's exit carries it
}

func (r *countingRuntime) Start(ctx context.Context, spec Spec) (Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.startErr; err != nil {
		r.startErr = nil
		return nil, err
	}
	r.starts++
	ev := make(chan ipc.Event)
	close(ev)
	run := endedRun{events: ev, exit: Exit{Err: r.exitErr}}
	r.exitErr = nil
	return run, nil
}

func (r *countingRuntime) Stop(ctx context.Context, id string, grace time.Duration) error { return nil }

func (r *countingRuntime) ListManaged(ctx context.Context) ([]Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists++
	return nil, nil
}

func (r *countingRuntime) counts() (lists, starts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists, r.starts
}

type endedRun struct {
	events chan ipc.Event
	exit   Exit
}

func (endedRun) ID() string                               { return "c" }
func (r endedRun) Events() <-chan ipc.Event               { return r.events }
func (r endedRun) Wait(ctx context.Context) (Exit, error) { return r.exit, nil }

// The engine is asked for a group's leftover containers on the group's
// first run and after a run that did not end cleanly (its start failed, or
// its container could not be stopped), not before every start.
func TestSuperviseLooksForLeftoversOnlyWhenOneMayBeLeft(t *testing.T) {
	ctx := context.Background()
	supervise := func(rt *countingRuntime, l *Leftovers, group string) Ended {
		spec := Spec{Name: "bridged-" + group, Group: group}
		return Supervise(ctx, rt, spec, Watch{Log: zerolog.Nop(), Instance: "now", Leftovers: l,
			Timeout: time.Hour, StartTimeout: time.Hour})
	}

	// Without a Leftovers, as before: one list per start.
	rt := &countingRuntime{}
	for range 3 {
		supervise(rt, nil, "fam")
	}
	if lists, starts := rt.counts(); lists != 3 || starts != 3 {
		t.Fatalf("without Leftovers: %d lists for %d starts; want one each", lists, starts)
	}

	rt, l := &countingRuntime{}, &Leftovers{}
	for range 3 {
		if e := supervise(rt, l, "fam"); e.Err != nil {
			t.Fatal(e.Err)
		}
	}
	if lists, starts := rt.counts(); lists != 1 || starts != 3 {
		t.Fatalf("three clean runs: %d lists for %d starts; want 1 list, at the group's first run", lists, starts)
	}
	supervise(rt, l, "work")
	if lists, _ := rt.counts(); lists != 2 {
		t.Fatalf("another group's first run: %d lists in all; want 2", lists)
	}

	// A container that could not be stopped: the next run looks, once.
	rt.mu.Lock()
	rt.exitErr = &NotStoppedError{ID: "c", Err: errors.New("engine gone")}
	rt.mu.Unlock()
	supervise(rt, l, "fam")
	supervise(rt, l, "fam")
	supervise(rt, l, "fam")
	if lists, _ := rt.counts(); lists != 3 {
		t.Fatalf("after a container not stopped: %d lists in all; want 3 (one more, before the next start only)", lists)
	}

	// A start that failed half-way: the next run looks, once.
	rt.mu.Lock()
	rt.startErr = errors.New("create failed")
	rt.mu.Unlock()
	if e := supervise(rt, l, "fam"); e.Err == nil {
		t.Fatal("a failed start ended without an error")
	}
	supervise(rt, l, "fam")
	supervise(rt, l, "fam")
	if lists, _ := rt.counts(); lists != 4 {
		t.Fatalf("after a failed start: %d lists in all; want 4", lists)
	}
}

// After the start-up sweep no group's first run asks the engine for a
// list; a run that did not end cleanly still makes the next one look.
func TestSuperviseAfterSweepLooksOnlyAfterAnUncleanEnd(t *testing.T) {
	ctx := context.Background()
	rt, l := &countingRuntime{}, &Leftovers{}
	if !StopLeftovers(ctx, rt, "/srv/bridged", "now", zerolog.Nop()) {
		t.Fatal("a sweep with nothing left reported a failure")
	}
	l.Swept()
	supervise := func(group string) Ended {
		return Supervise(ctx, rt, Spec{Name: "bridged-" + group, Group: group}, Watch{Log: zerolog.Nop(), Instance: "now",
			Leftovers: l, Timeout: time.Hour, StartTimeout: time.Hour})
	}
	supervise("fam")
	supervise("work")
	if lists, starts := rt.counts(); lists != 1 || starts != 2 {
		t.Fatalf("two first runs after the sweep: %d lists (the sweep's included) for %d starts; want 1 list", lists, starts)
	}
	rt.mu.Lock()
	rt.exitErr = &NotStoppedError{ID: "c", Err: errors.New("engine gone")}
	rt.mu.Unlock()
	supervise("fam")
	supervise("fam")
	supervise("fam")
	if lists, _ := rt.counts(); lists != 2 {
		t.Fatalf("after a container not stopped: %d lists in all; want 2 (one more, before the next start only)", lists)
	}
}
