package router

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/container"
)

// engineRuntime is the fake runtime with an engine that lists the fake's
// live containers and can fail to stop some: a container whose stop fails
// keeps running.
type engineRuntime struct {
	*fakeRuntime
	mu sync.Mutex
	// fails decides whether the stop of id fails (nil: every stop works).
	fails func(id string) bool
}

func (e *engineRuntime) ListManaged(ctx context.Context) ([]container.Info, error) {
	e.fakeRuntime.mu.Lock()
	defer e.fakeRuntime.mu.Unlock()
	out := append([]container.Info(nil), e.managed...)
	for id, run := range e.runs {
		run.mu.Lock()
		live := !run.closed
		run.mu.Unlock()
		if live {
			out = append(out, container.Info{ID: id, Name: run.spec.Name, Group: run.spec.Group, Instance: run.spec.Instance, State: "running"})
		}
	}
	return out, nil
}

func (e *engineRuntime) Stop(ctx context.Context, id string, grace time.Duration) error {
	e.mu.Lock()
	fail := e.fails != nil && e.fails(id)
	e.mu.Unlock()
	if fail {
		e.fakeRuntime.mu.Lock()
		e.history = append(e.history, "stop-failed "+id)
		e.fakeRuntime.mu.Unlock()
		return errors.New("the Docker engine did not answer")
	}
	e.fakeRuntime.mu.Lock()
	e.managed = slices.DeleteFunc(e.managed, func(c container.Info) bool { return c.ID == id })
	e.fakeRuntime.mu.Unlock()
	return e.fakeRuntime.Stop(ctx, id, grace)
}

func (e *engineRuntime) historyNow() []string {
	e.fakeRuntime.mu.Lock()
	defer e.fakeRuntime.mu.Unlock()
	return slices.Clone(e.history)
}

// newEngineHarness is newHarness over an engineRuntime.
func newEngineHarness(t *testing.T, mod func(*Config)) (*harness, *engineRuntime) {
	t.Helper()
	h := newHarness(t, mod)
	rt := &engineRuntime{fakeRuntime: h.rt}
	var err error
	h.r, err = New(h.cfg, Deps{Store: h.db, Runtime: rt, Channels: []channel.Channel{h.ch}, Log: testLogger(t), Ingest: newIngest(t, h.db, h.ch, h.cfg)})
	if err != nil {
		t.Fatal(err)
	}
	h.r.out = h.r.newSender(5 * time.Millisecond)
	return h, rt
}

// onceFailing fails the first stop of each id in ids.
func onceFailing(ids ...string) func(string) bool {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(ids, id) || seen[id] {
			return false
		}
		seen[id] = true
		return true
	}
}

// A container of the group left by an earlier run of this daemon (its
// engine connection was lost and it could not be stopped then) is stopped
// before a new one starts; while it cannot be stopped, the run fails and
// starts none.
func TestLeftoverStoppedBeforeNextStart(t *testing.T) {
	h, rt := newEngineHarness(t, nil)
	rt.managed = []container.Info{{ID: "left", Name: "bridged-main-0", Group: "main", Instance: h.cfg.Instance, State: "running"}}
	rt.fails = onceFailing("left")
	h.start()
	h.post(mainChat, "hello")
	run := h.nextRun()
	if got, want := rt.historyNow(), []string{"stop-failed left", "stop left", "start main"}; !slices.Equal(got, want) {
		t.Fatalf("runtime calls: got %v; want %v (the retry stops the leftover, then starts)", got, want)
	}
	run.result("hi")
	if s := h.nextSend(); s.Text != "hi" {
		t.Fatalf("sent %q; want the reply", s.Text)
	}
	run.exit(0)
	h.waitIdle("main")
}

// A leftover that cannot be stopped at all: no container is ever started
// beside it, and the chat gets the failure notice after the retries.
func TestLeftoverNotStoppedFailsVisibly(t *testing.T) {
	h, rt := newEngineHarness(t, nil)
	rt.managed = []container.Info{{ID: "left", Name: "bridged-main-0", Group: "main", Instance: h.cfg.Instance, State: "running"}}
	rt.fails = func(string) bool { return true }
	h.start()
	h.post(mainChat, "hello")
	s := h.nextSend()
	if !strings.Contains(s.Text, "could not answer") || !strings.Contains(s.Text, "could not be stopped") {
		t.Fatalf("notice: got %q; want the failure naming the container that could not be stopped", s.Text)
	}
	if n := rt.starts(); n != 0 {
		t.Fatalf("starts: got %d; want 0 while the old container runs", n)
	}
	st := h.r.Status()
	if len(st.Failures) == 0 || !strings.Contains(st.Failures[len(st.Failures)-1].Error, "could not be stopped") {
		t.Fatalf("status failures: %+v; want the failure", st.Failures)
	}
}

// A container that cannot be stopped when its start timeout fires ends the
// run (it does not wait forever for an end the engine will not report);
// the retry stops it before starting the next.
func TestStopFailureEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt := newEngineHarness(t, func(c *Config) { c.StartTimeout = 20 * time.Millisecond })
		rt.fails = onceFailing("c1")
		h.start()
		h.post(mainChat, "hello")
		h.nextRun() // prints nothing: stopped at its start timeout, which fails
		run := h.nextRun()
		if got, want := rt.historyNow(), []string{"start main", "stop-failed c1", "stop c1", "start main"}; !slices.Equal(got, want) {
			t.Fatalf("runtime calls: got %v; want %v", got, want)
		}
		run.result("hi")
		if s := h.nextSend(); s.Text != "hi" {
			t.Fatalf("sent %q; want the reply", s.Text)
		}
		run.exit(0)
		h.waitIdle("main")
	})
}
