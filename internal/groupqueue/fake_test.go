package groupqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/testlog"
)

// fakeCall is one handler invocation.
type fakeCall struct {
	group string
	kind  RunKind
	task  string
	ctx   context.Context
	run   *Run       // the run object the queue handed over
	done  chan error // the test (or CloseIdle) ends the run by sending here
	// idle: the fake holder's agent waits for input (as it told the queue
	// through run.MarkIdle); a holder closes only an idle container.
	idle bool
}

type event struct {
	at   time.Duration // since the fake was made (fake time in the bubble)
	what string
}

// fake is a hand-written Handlers[string] implementation that records everything the
// queue asks of it and checks the concurrency limits on every run.
type fake struct {
	t0  time.Time
	max int // the queue's MaxConcurrent, checked on every start

	mu        sync.Mutex
	events    []event
	taken     int
	current   map[string]*fakeCall
	active    int
	peak      int
	perGroup  map[string]int
	violation []string
	ranTasks  map[string]int

	// closeEnds makes CloseIdle end the group's run, as a real container
	// exits after the close sentinel.
	closeEnds bool
	// auto, if set, ends every run at once with its result.
	auto func(c *fakeCall) error
	// closePanics makes CloseIdle panic after recording.
	closePanics bool
	// closeGate, if set, holds every CloseIdle until it is closed.
	closeGate chan struct{}
}

func newFake(max int) *fake {
	return &fake{
		t0:        time.Now(),
		max:       max,
		current:   make(map[string]*fakeCall),
		perGroup:  make(map[string]int),
		ranTasks:  make(map[string]int),
		closeEnds: true,
	}
}

func (f *fake) handlers() Handlers[string] {
	return Handlers[string]{
		RunMessages: func(ctx context.Context, run *Run) error {
			run.Begin() // takes the group's messages at once
			return f.run(&fakeCall{group: run.Group(), kind: KindMessages, ctx: ctx, run: run})
		},
		RunTask: func(ctx context.Context, run *Run, t TaskRef[string]) error {
			return f.run(&fakeCall{group: run.Group(), kind: KindTask, task: t.ID, ctx: ctx, run: run})
		},
		CloseIdle: func(group string) {
			f.mu.Lock()
			panics, gate := f.closePanics, f.closeGate
			f.mu.Unlock()
			if gate != nil {
				<-gate
			}
			if panics {
				f.mu.Lock()
				f.recordLocked("close " + group)
				f.mu.Unlock()
				panic("close failed")
			}
			f.close(group, false)
		},
		Outcomes: OutcomeFunc(func(group string, o Outcome[string]) {
			if o.Event != Dropped {
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.recordLocked("drop " + group + " " + o.Task.ID)
		}),
	}
}

func (f *fake) run(c *fakeCall) error {
	c.done = make(chan error, 1)
	f.mu.Lock()
	f.active++
	f.peak = max(f.peak, f.active)
	f.perGroup[c.group]++
	if f.perGroup[c.group] > 1 {
		f.violation = append(f.violation, "two runs at once for "+c.group)
	}
	if f.max > 0 && f.active > f.max {
		f.violation = append(f.violation, fmt.Sprintf("%d runs at once, cap %d", f.active, f.max))
	}
	what := "run " + c.group + " " + string(c.kind)
	if c.kind == KindTask {
		what += " " + c.task
		f.ranTasks[c.task]++
	}
	f.recordLocked(what)
	f.current[c.group] = c
	auto := f.auto
	f.mu.Unlock()

	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.active--
		f.perGroup[c.group]--
		if f.current[c.group] == c {
			delete(f.current, c.group)
		}
	}()
	if auto != nil {
		return auto(c)
	}
	select {
	case err := <-c.done:
		return err
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// close is the fake holder closing group's container: only an idle one
// (a holder that became busy since the queue asked ignores the ask, and
// says so in the events), or any when the holder itself decided (own).
func (f *fake) close(group string, own bool) {
	f.mu.Lock()
	c := f.current[group]
	switch {
	case c == nil:
		f.recordLocked("close " + group + " (no run)")
		f.mu.Unlock()
		return
	case !c.idle && !own:
		f.recordLocked("close " + group + " (busy: ignored)")
		f.mu.Unlock()
		return
	}
	f.recordLocked("close " + group)
	ends := f.closeEnds
	f.mu.Unlock()
	c.run.MarkClosing()
	if ends {
		select {
		case c.done <- nil:
		default:
		}
	}
}

// idle is the fake holder's agent finishing a turn: it tells the queue, and
// closes its container when the queue wants the slot back.
func (f *fake) idle(t *testing.T, group string) {
	t.Helper()
	f.mu.Lock()
	c := f.current[group]
	if c != nil {
		c.idle = true
	}
	f.mu.Unlock()
	if c == nil {
		t.Fatalf("idle %s: no run active", group)
	}
	if c.run.MarkIdle() {
		f.close(group, true)
	}
}

// busy is the fake holder piping new input into its waiting agent.
func (f *fake) busy(t *testing.T, group string) {
	t.Helper()
	f.mu.Lock()
	c := f.current[group]
	if c != nil {
		c.idle = false
	}
	f.mu.Unlock()
	if c == nil {
		t.Fatalf("busy %s: no run active", group)
	}
	c.run.MarkBusy()
}

func (f *fake) recordLocked(what string) {
	f.events = append(f.events, event{at: time.Since(f.t0), what: what})
}

// take returns what happened since the last take.
func (f *fake) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events[f.taken:] {
		out = append(out, e.what)
	}
	f.taken = len(f.events)
	return out
}

// timed returns every recorded event whose text is what, with its time.
func (f *fake) timed(what string) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for _, e := range f.events {
		if e.what == what {
			out = append(out, e.at)
		}
	}
	return out
}

// end finishes the group's current run with err and lets the queue settle.
func (f *fake) end(t *testing.T, group string, err error) {
	t.Helper()
	f.mu.Lock()
	c := f.current[group]
	f.mu.Unlock()
	if c == nil {
		t.Fatalf("end %s: no run active", group)
	}
	c.done <- err
	synctest.Wait()
}

// runOf returns the run object of the group's current run.
func (f *fake) runOf(t *testing.T, group string) *Run {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.current[group]
	if c == nil {
		t.Fatalf("run object of %s: no run active", group)
	}
	return c.run
}

func (f *fake) checkLimits(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violation {
		t.Error(v)
	}
}

// startQueue makes a queue over f and runs it until the test ends. It must
// be called inside a synctest bubble. At cleanup the queue is shut down
// (busy fake runs are cancelled after an hour of fake time).
func startQueue(t *testing.T, cfg Config, f *fake) (*Queue[string], *testlog.Buffer) {
	t.Helper()
	q, logs := newQueue(t, cfg, f)
	runQueue(t, q)
	return q, logs
}

func newQueue(t *testing.T, cfg Config, f *fake) (*Queue[string], *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	q, err := New(cfg, f.handlers(), zerolog.New(logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return q, logs
}

func runQueue(t *testing.T, q *Queue[string]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Hour)
		defer scancel()
		_ = q.Shutdown(sctx)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: got %v; want nil", err)
		}
	})
	synctest.Wait()
}

// advance moves the bubble's fake clock forward by d (sleeping inside a
// synctest bubble returns as soon as every other goroutine is blocked, with
// the clock moved on exactly d) and lets the queue settle.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func wantEvents(t *testing.T, f *fake, want ...string) {
	t.Helper()
	got := f.take()
	if !slices.Equal(got, want) {
		t.Fatalf("events: got %q; want %q", got, want)
	}
}

// wantEventsUnordered is wantEvents for runs started together, whose
// goroutines may record in any order.
func wantEventsUnordered(t *testing.T, f *fake, want ...string) {
	t.Helper()
	got := f.take()
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("events (any order): got %q; want %q", got, want)
	}
}

// OutcomeFunc is an Outcomes that is a function.
type OutcomeFunc func(group string, o Outcome[string])

// Outcome[string] calls f.
func (f OutcomeFunc) Outcome(group string, o Outcome[string]) { f(group, o) }
