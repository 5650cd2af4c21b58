package groupqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

var errBoom = errors.New("container exited with code 1")

func TestNewRejectsBadInput(t *testing.T) {
	ok := newFake(0).handlers()
	noClose := ok
	noClose.CloseIdle = nil
	tests := []struct {
		name string
		cfg  Config
		h    Handlers[string]
	}{
		{"missing handler", Config{}, noClose},
		{"negative cap", Config{MaxConcurrent: -1}, ok},
		{"zero retry delay", Config{RetryDelays: []time.Duration{time.Second, 0}}, ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := New(tt.cfg, tt.h, zerolog.Nop())
			if err == nil || q != nil {
				t.Fatalf("New: got (%v, %v); want an error", q, err)
			}
		})
	}
}

func TestNothingRunsBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2)
		q, _ := newQueue(t, Config{MaxConcurrent: 2}, f)
		q.EnqueueMessages("a")
		q.EnqueueTask("b", TaskRef[string]{ID: "t1"})
		synctest.Wait()
		wantEvents(t, f)
		if got := q.Status().Waiting; !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("waiting before Run: got %q; want [a b]", got)
		}
		runQueue(t, q)
		wantEventsUnordered(t, f, "run a messages", "run b task t1")
	})
}

func TestOneRunPerGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(3)
		q, _ := startQueue(t, Config{MaxConcurrent: 3}, f)
		q.EnqueueMessages("a")
		q.EnqueueMessages("a")
		synctest.Wait()
		wantEvents(t, f, "run a messages")

		// Messages arriving during the run coalesce into one follow-up run.
		q.EnqueueMessages("a")
		q.EnqueueMessages("a")
		synctest.Wait()
		wantEvents(t, f)
		if running, isTask := q.Active("a"); !running || isTask {
			t.Fatalf("Active(a): got (%v, %v); want (true, false)", running, isTask)
		}

		f.end(t, "a", nil)
		wantEvents(t, f, "run a messages")
		f.end(t, "a", nil)
		wantEvents(t, f)
		if running, _ := q.Active("a"); running {
			t.Fatalf("Active(a) after the runs: got running; want not running")
		}
		f.checkLimits(t)
	})
}

func TestCapAndFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2)
		q, _ := startQueue(t, Config{MaxConcurrent: 2}, f)
		for _, g := range []string{"a", "b", "c", "d"} {
			q.EnqueueMessages(g)
		}
		synctest.Wait()
		wantEventsUnordered(t, f, "run a messages", "run b messages")
		st := q.Status()
		if st.Running != 2 || !slices.Equal(st.Waiting, []string{"c", "d"}) {
			t.Fatalf("status: got running %d waiting %q; want 2 and [c d]", st.Running, st.Waiting)
		}

		f.end(t, "b", nil)
		wantEvents(t, f, "run c messages")
		// A group whose run ended with new work waits behind groups already waiting.
		q.EnqueueMessages("a")
		f.end(t, "a", nil)
		wantEvents(t, f, "run d messages")
		if got := q.Status().Waiting; !slices.Equal(got, []string{"a"}) {
			t.Fatalf("waiting: got %q; want [a]", got)
		}
		f.end(t, "c", nil)
		wantEvents(t, f, "run a messages")
		f.checkLimits(t)
		if f.peak != 2 {
			t.Fatalf("peak concurrency: got %d; want 2", f.peak)
		}
	})
}

func TestFairOrder(t *testing.T) {
	type enqueue struct {
		group, task string // task "" means messages
	}
	tests := []struct {
		name    string
		enqueue []enqueue
		want    []string // runs after the first, in order
	}{
		{
			name:    "groups in arrival order, tasks or not",
			enqueue: []enqueue{{"b", ""}, {"c", ""}, {"d", "t1"}, {"e", ""}},
			want:    []string{"run b messages", "run c messages", "run d task t1", "run e messages"},
		},
		{
			name:    "within a group tasks and messages take turns",
			enqueue: []enqueue{{"a", ""}, {"a", "t1"}, {"a", "t2"}},
			want:    []string{"run a task t1", "run a messages", "run a task t2"},
		},
		{
			name:    "own follow-up task waits behind a waiting group",
			enqueue: []enqueue{{"b", ""}, {"a", "t1"}},
			want:    []string{"run b messages", "run a task t1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(1)
				q, _ := startQueue(t, Config{MaxConcurrent: 1}, f)
				q.EnqueueMessages("a")
				synctest.Wait()
				wantEvents(t, f, "run a messages")
				for _, e := range tt.enqueue {
					if e.task == "" {
						q.EnqueueMessages(e.group)
					} else {
						q.EnqueueTask(e.group, TaskRef[string]{ID: e.task})
					}
				}
				synctest.Wait()
				running := "a"
				for _, want := range tt.want {
					f.end(t, running, nil)
					wantEvents(t, f, want)
					running = strings.Fields(want)[1]
				}
				f.end(t, running, nil)
				wantEvents(t, f)
				f.checkLimits(t)
			})
		})
	}
}

// A task that is due again every time it ends (a one-minute task whose run
// takes longer) keeps a message of its group waiting for at most the task
// run under way when the message came, however busy the queue is.
func TestBusyTaskCannotHoldBackMessages(t *testing.T) {
	tests := []struct {
		name  string
		cap   int
		tasks []string // group a's busy tasks; the first runs when the message comes
		other bool     // group b has messages all the time
	}{
		{name: "one busy task, every slot taken", cap: 1, tasks: []string{"t1"}, other: true},
		{name: "two busy tasks, a slot free", cap: 2, tasks: []string{"t1", "t2"}},
		{name: "two busy tasks, every slot taken", cap: 1, tasks: []string{"t1", "t2"}, other: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(tt.cap)
				q, _ := startQueue(t, Config{MaxConcurrent: tt.cap}, f)
				for _, id := range tt.tasks {
					q.EnqueueTask("a", TaskRef[string]{ID: id})
				}
				synctest.Wait()
				wantEvents(t, f, "run a task "+tt.tasks[0])
				q.EnqueueMessages("a")
				if tt.other {
					q.EnqueueMessages("b")
				}
				synctest.Wait()

				// Runs last a minute; each one that ends is due again at once.
				taskRuns := 1 // the one under way
				for range 20 {
					advance(time.Minute)
					f.mu.Lock()
					var running []*fakeCall
					for _, c := range f.current {
						running = append(running, c)
					}
					f.mu.Unlock()
					if len(running) == 0 {
						t.Fatal("no run active")
					}
					slices.SortFunc(running, func(x, y *fakeCall) int { return strings.Compare(x.group, y.group) })
					c := running[0]
					f.end(t, c.group, nil)
					if c.kind == KindTask {
						q.EnqueueTask(c.group, TaskRef[string]{ID: c.task})
					} else {
						q.EnqueueMessages(c.group)
					}
					synctest.Wait()
					for _, e := range f.take() {
						switch {
						case e == "run a messages":
							if taskRuns > 1 {
								t.Fatalf("the message waited for %d task runs; want at most 1", taskRuns)
							}
							f.checkLimits(t)
							return
						case strings.HasPrefix(e, "run a task "):
							taskRuns++
						}
					}
				}
				t.Fatalf("the message did not run in 20 minutes (%d task runs of its group)", taskRuns)
			})
		})
	}
}

func TestQueuedTaskClosesOnlyIdleContainer(t *testing.T) {
	tests := []struct {
		name      string
		before    func(t *testing.T, q *Queue[string], f *fake)
		wantClose bool
	}{
		{"busy container", func(t *testing.T, q *Queue[string], f *fake) {}, false},
		{"idle container", func(t *testing.T, q *Queue[string], f *fake) { f.idle(t, "a") }, true},
		{"idle then piped", func(t *testing.T, q *Queue[string], f *fake) {
			f.idle(t, "a")
			f.busy(t, "a")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(5)
				q, _ := startQueue(t, Config{}, f)
				q.EnqueueMessages("a")
				synctest.Wait()
				wantEvents(t, f, "run a messages")
				tt.before(t, q, f)
				q.EnqueueTask("a", TaskRef[string]{ID: "t1"})
				q.EnqueueTask("a", TaskRef[string]{ID: "t2"})
				synctest.Wait()
				if tt.wantClose {
					// Closed once, and the task runs after the container exited.
					wantEvents(t, f, "close a", "run a task t1")
					return
				}
				wantEvents(t, f)
				// The next result makes it idle; with tasks pending it closes at once.
				f.idle(t, "a")
				synctest.Wait()
				wantEvents(t, f, "close a", "run a task t1")
			})
		})
	}
}

func TestMessagesWaitForTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		q, _ := startQueue(t, Config{}, f)
		q.EnqueueTask("a", TaskRef[string]{ID: "t1"})
		synctest.Wait()
		wantEvents(t, f, "run a task t1")
		if running, isTask := q.Active("a"); !running || !isTask {
			t.Fatalf("Active(a): got (%v, %v); want (true, true)", running, isTask)
		}
		// Messages never go into a task's container: a busy one is left to
		// its turn, and the messages wait for a run of their own.
		q.EnqueueMessages("a")
		synctest.Wait()
		wantEvents(t, f)
		// Once the task's agent waits, its container is closed for them.
		f.idle(t, "a")
		synctest.Wait()
		wantEvents(t, f, "close a", "run a messages")
	})
}

func startA(t *testing.T, q *Queue[string]) {
	q.EnqueueMessages("a")
	synctest.Wait()
	if running, _ := q.Active("a"); !running {
		t.Fatal("group a did not start")
	}
}

func TestFollowUpRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		q, _ := startQueue(t, Config{}, f)
		startA(t, q)
		f.take()
		// Not piped while busy: no close, a follow-up run after this one.
		q.EnqueueMessages("a")
		synctest.Wait()
		wantEvents(t, f)
		f.end(t, "a", nil)
		wantEvents(t, f, "run a messages")

		// Not piped while idle: the container is closed now rather than
		// sitting out its idle timeout.
		f.idle(t, "a")
		q.EnqueueMessages("a")
		synctest.Wait()
		wantEvents(t, f, "close a", "run a messages")

		// Messages left pending when the container becomes idle: same.
		q.EnqueueMessages("a")
		f.idle(t, "a")
		synctest.Wait()
		wantEvents(t, f, "close a", "run a messages")
	})
}

func TestWaitingGroupClosesLongestIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2)
		q, _ := startQueue(t, Config{MaxConcurrent: 2}, f)
		q.EnqueueMessages("a")
		q.EnqueueMessages("b")
		synctest.Wait()
		f.take()

		f.idle(t, "b")
		advance(time.Second)
		f.idle(t, "a")
		q.EnqueueMessages("c")
		synctest.Wait()
		// One slot is needed: only the container idle the longest closes.
		wantEvents(t, f, "close b", "run c messages")

		// The next group to wait closes a, still idle.
		q.EnqueueMessages("d")
		synctest.Wait()
		wantEvents(t, f, "close a", "run d messages")
		// Nobody idle: e waits, and the first container to become idle closes.
		q.EnqueueMessages("e")
		synctest.Wait()
		wantEvents(t, f)
		f.idle(t, "d")
		synctest.Wait()
		wantEvents(t, f, "close d", "run e messages")
		f.checkLimits(t)
	})
}

func TestRetryBackoff(t *testing.T) {
	sec := func(s ...int) []time.Duration {
		var out []time.Duration
		for _, v := range s {
			out = append(out, time.Duration(v)*time.Second)
		}
		return out
	}
	tests := []struct {
		name   string
		delays []time.Duration
		want   []time.Duration // start times of the runs after one enqueue
	}{
		{"default delays", nil, sec(0, 5, 15, 35, 75, 155)},
		{"custom delays", sec(1, 2), sec(0, 1, 3)},
		{"retries off", []time.Duration{}, sec(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(5)
				f.auto = func(*fakeCall) error { return errBoom }
				q, logs := startQueue(t, Config{RetryDelays: tt.delays}, f)
				q.EnqueueMessages("a")
				synctest.Wait()
				advance(time.Hour) // long after the last retry: no loop
				got := f.timed("run a messages")
				if !slices.Equal(got, tt.want) {
					t.Fatalf("run times: got %v; want %v", got, tt.want)
				}
				st := q.Status()
				if len(st.Groups) != 1 || !st.Groups[0].GaveUp || st.Groups[0].PendingMessages {
					t.Fatalf("status after giving up: got %+v; want gave up, nothing pending", st.Groups)
				}
				if !strings.Contains(logs.String(), "message run failed for good") {
					t.Fatalf("log: got %s; want a line saying the run failed for good", logs)
				}

				// The next message starts a fresh sequence at once.
				start := time.Since(f.t0)
				q.EnqueueMessages("a")
				synctest.Wait()
				advance(time.Hour)
				var again []time.Duration
				for _, d := range f.timed("run a messages")[len(tt.want):] {
					again = append(again, d-start)
				}
				if !slices.Equal(again, tt.want) {
					t.Fatalf("run times after a new message: got %v; want %v", again, tt.want)
				}
			})
		})
	}
}

// A run error wrapping ErrNoRetry ends the retry sequence at once; the
// next message starts a fresh one.
func TestNoRetryEndsSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		var mu sync.Mutex
		results := []error{errBoom, fmt.Errorf("hung again: %w", ErrNoRetry), nil}
		f.auto = func(*fakeCall) error {
			mu.Lock()
			defer mu.Unlock()
			err := results[0]
			results = results[1:]
			return err
		}
		q, logs := startQueue(t, Config{}, f)
		q.EnqueueMessages("a")
		synctest.Wait()
		advance(time.Hour)
		if got, want := f.timed("run a messages"), []time.Duration{0, 5 * time.Second}; !slices.Equal(got, want) {
			t.Fatalf("run times: got %v; want %v (no retry after ErrNoRetry)", got, want)
		}
		st := q.Status()
		if len(st.Groups) != 1 || !st.Groups[0].GaveUp || st.Groups[0].PendingMessages || !st.Groups[0].NextRetry.IsZero() {
			t.Fatalf("status: got %+v; want gave up, nothing pending, no retry", st.Groups)
		}
		if !strings.Contains(logs.String(), "message run failed for good") {
			t.Fatalf("log: got %s; want a line saying the run failed for good", logs)
		}
		q.EnqueueMessages("a")
		synctest.Wait()
		if got := len(f.timed("run a messages")); got != 3 {
			t.Fatalf("runs after a new message: got %d; want 3", got)
		}
	})
}

// A hang (ErrHang) is retried once: the second hang of a sequence ends it.
// The owner hears every step through Outcomes: the retry with its attempt
// number, the final failure, and the success that ends a sequence.
func TestHangRetriedOnceAndOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		var mu sync.Mutex
		var outs []string
		results := []error{fmt.Errorf("timed out: %w", ErrHang), errBoom, fmt.Errorf("timed out: %w", ErrHang), nil}
		f.auto = func(*fakeCall) error {
			mu.Lock()
			defer mu.Unlock()
			err := results[0]
			results = results[1:]
			return err
		}
		h := f.handlers()
		h.Outcomes = OutcomeFunc(func(group string, o Outcome[string]) {
			mu.Lock()
			defer mu.Unlock()
			outs = append(outs, fmt.Sprintf("%s %d %d/%d", group, o.Event, o.Attempt, o.Attempts))
		})
		q, err := New(Config{}, h, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		runQueue(t, q)
		q.EnqueueMessages("a")
		synctest.Wait()
		advance(time.Hour)
		if got, want := f.timed("run a messages"), []time.Duration{0, 5 * time.Second, 15 * time.Second}; !slices.Equal(got, want) {
			t.Fatalf("run times: got %v; want %v (a second hang ends the retries)", got, want)
		}
		q.EnqueueMessages("a")
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []string{
			fmt.Sprintf("a %d 1/6", Retrying), fmt.Sprintf("a %d 2/6", Retrying), fmt.Sprintf("a %d 3/6", GaveUp),
			fmt.Sprintf("a %d 0/0", Succeeded),
		}
		if !slices.Equal(outs, want) {
			t.Fatalf("outcomes: got %q; want %q", outs, want)
		}
	})
}

func TestSuccessResetsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		var mu sync.Mutex
		results := []error{errBoom, errBoom, nil, errBoom, nil}
		f.auto = func(*fakeCall) error {
			mu.Lock()
			defer mu.Unlock()
			err := results[0]
			results = results[1:]
			return err
		}
		q, _ := startQueue(t, Config{}, f)
		q.EnqueueMessages("a")
		synctest.Wait()
		advance(time.Minute) // fails at 0 and 5 s, succeeds at 15 s
		if st := q.Status(); len(st.Groups) != 0 {
			t.Fatalf("status after a success: got %+v; want no group state", st.Groups)
		}
		q.EnqueueMessages("a") // at 60 s: fails, retried 5 s later, not 20
		synctest.Wait()
		advance(time.Minute)
		want := []time.Duration{0, 5 * time.Second, 15 * time.Second, 60 * time.Second, 65 * time.Second}
		if got := f.timed("run a messages"); !slices.Equal(got, want) {
			t.Fatalf("run times: got %v; want %v", got, want)
		}
	})
}

func TestMessagesDuringBackoffJoinRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		q, _ := startQueue(t, Config{}, f)
		startA(t, q)
		f.end(t, "a", errBoom)
		advance(time.Second)
		q.EnqueueMessages("a")
		synctest.Wait()
		st := q.Status()
		if len(st.Groups) != 1 || st.Groups[0].Retries != 1 || !st.Groups[0].NextRetry.Equal(f.t0.Add(5*time.Second)) || len(st.Waiting) != 0 {
			t.Fatalf("status during back-off: got %+v waiting %q; want 1 retry due at +5s, nobody waiting", st.Groups, st.Waiting)
		}
		advance(3 * time.Second)
		if got := f.timed("run a messages"); len(got) != 1 {
			t.Fatalf("runs before the retry is due: got %v; want only the first", got)
		}
		advance(time.Second)
		if got, want := f.timed("run a messages"), []time.Duration{0, 5 * time.Second}; !slices.Equal(got, want) {
			t.Fatalf("run times: got %v; want %v", got, want)
		}
	})
}

func TestPanicsAreRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		var calls atomic.Int32
		f.auto = func(c *fakeCall) error {
			if calls.Add(1) <= 2 {
				panic("boom in " + string(c.kind))
			}
			return nil
		}
		q, logs := startQueue(t, Config{}, f)
		q.EnqueueTask("b", TaskRef[string]{ID: "t1"})
		q.EnqueueMessages("a")
		synctest.Wait()
		advance(5 * time.Second) // the panicked message run is retried like a failed one
		if got, want := f.timed("run a messages"), []time.Duration{0, 5 * time.Second}; !slices.Equal(got, want) {
			t.Fatalf("run times: got %v; want %v", got, want)
		}
		if got := strings.Count(logs.String(), "run handler panicked"); got != 2 {
			t.Fatalf("panic log lines: got %d; want 2", got)
		}

		f.mu.Lock()
		f.auto = nil
		f.mu.Unlock()
		startA(t, q)

		// A panicking CloseIdle is logged; the queue keeps working.
		f.mu.Lock()
		f.closePanics = true
		f.mu.Unlock()
		f.idle(t, "a")
		q.EnqueueTask("a", TaskRef[string]{ID: "t2"})
		synctest.Wait()
		if !strings.Contains(logs.String(), "close handler panicked") {
			t.Fatal("log: want a line for the panicking close handler")
		}
		f.end(t, "a", nil)
		if got := f.timed("run a task t2"); len(got) != 1 {
			t.Fatalf("task after a panicking close: got %d runs; want 1", len(got))
		}
	})
}

func TestTaskDeduplication(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		q, _ := startQueue(t, Config{}, f)
		startA(t, q)
		f.take()
		q.EnqueueTask("a", TaskRef[string]{ID: "t1"})
		q.EnqueueTask("a", TaskRef[string]{ID: "t1"})
		q.EnqueueTask("a", TaskRef[string]{ID: ""})
		synctest.Wait()
		wantEvents(t, f, "drop a ")
		if got := q.Status().Groups[0].PendingTasks; !slices.Equal(got, []string{"t1"}) {
			t.Fatalf("pending tasks: got %q; want [t1]", got)
		}
		f.end(t, "a", nil)
		wantEvents(t, f, "run a task t1")
		q.EnqueueTask("a", TaskRef[string]{ID: "t1"}) // the running task
		f.end(t, "a", nil)
		wantEvents(t, f)
	})
}

func TestShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(4)
		q, logs := startQueue(t, Config{MaxConcurrent: 4}, f)
		for _, g := range []string{"a", "b", "c"} {
			q.EnqueueMessages(g)
		}
		synctest.Wait()
		wantEventsUnordered(t, f, "run a messages", "run b messages", "run c messages")
		f.idle(t, "a")
		q.EnqueueTask("b", TaskRef[string]{ID: "t1"}) // pending behind busy b
		q.EnqueueMessages("c")                        // follow-up for busy c
		q.EnqueueMessages("d")                        // takes the last slot
		synctest.Wait()
		q.EnqueueMessages("e") // waits; closes idle a for its slot
		synctest.Wait()
		wantEvents(t, f, "run d messages", "close a", "run e messages")
		f.idle(t, "e")
		q.EnqueueMessages("g") // waits for a slot; e is closed for it
		synctest.Wait()
		wantEvents(t, f, "close e", "run g messages")
		q.EnqueueMessages("h") // waits: nobody is idle

		res := make(chan error, 1)
		go func() { res <- q.Shutdown(context.Background()) }()
		synctest.Wait()
		wantEvents(t, f, "drop b t1")
		select {
		case err := <-res:
			t.Fatalf("Shutdown returned %v while runs are active", err)
		default:
		}
		if st := q.Status(); !st.ShuttingDown || len(st.Waiting) != 0 {
			t.Fatalf("status during shutdown: got %+v; want shutting down, nobody waiting", st)
		}

		q.EnqueueMessages("f")
		q.EnqueueTask("f", TaskRef[string]{ID: "t2"})
		synctest.Wait()
		wantEvents(t, f, "drop f t2")
		if !strings.Contains(logs.String(), "messages ignored: queue shutting down") {
			t.Fatal("log: want a debug line for messages enqueued after shutdown")
		}

		// Busy b closes when its turn ends; c and d end by themselves.
		f.idle(t, "b")
		synctest.Wait()
		wantEvents(t, f, "close b")
		f.end(t, "c", errBoom) // no retry during shutdown
		f.end(t, "d", nil)
		f.end(t, "g", nil)
		if err := <-res; err != nil {
			t.Fatalf("Shutdown: got %v; want nil", err)
		}
		advance(time.Hour) // nothing pending ever starts: no h, no c follow-up, no t1
		wantEvents(t, f)
		if st := q.Status(); st.Running != 0 || len(st.Waiting) != 0 {
			t.Fatalf("status after shutdown: got %+v", st)
		}
	})
}

func TestShutdownClosesIdleAndDropsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		q, _ := startQueue(t, Config{}, f)
		q.EnqueueMessages("a")
		synctest.Wait()
		q.EnqueueMessages("b")
		synctest.Wait()
		f.idle(t, "a")
		q.EnqueueTask("b", TaskRef[string]{ID: "t1"}) // b busy: pending, no close
		synctest.Wait()
		wantEvents(t, f, "run a messages", "run b messages")

		res := make(chan error, 1)
		go func() { res <- q.Shutdown(context.Background()) }()
		synctest.Wait()
		// Pending task reported, idle a closed, busy b left to finish its turn.
		wantEvents(t, f, "drop b t1", "close a")
		f.idle(t, "b")
		synctest.Wait()
		wantEvents(t, f, "close b")
		if err := <-res; err != nil {
			t.Fatalf("Shutdown: got %v; want nil", err)
		}
	})
}

func TestShutdownDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		q, _ := startQueue(t, Config{}, f)
		q.EnqueueMessages("b")
		q.EnqueueMessages("a")
		synctest.Wait()
		f.mu.Lock()
		ctxA := f.current["a"].ctx
		f.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err := q.Shutdown(ctx)
		if err == nil || !strings.Contains(err.Error(), "a, b") || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: got %v; want a deadline error naming a, b", err)
		}
		if waited := time.Since(start); waited != 30*time.Second {
			t.Fatalf("Shutdown waited %v; want 30s", waited)
		}
		synctest.Wait()
		if ctxA.Err() == nil {
			t.Fatal("run context after the deadline: not cancelled; want cancelled")
		}
		if st := q.Status(); st.Running != 0 {
			t.Fatalf("runs after cancellation: got %d; want 0", st.Running)
		}
	})
}

func TestRunContextEndDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(5)
		q, _ := newQueue(t, Config{}, f)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- q.Run(ctx) }()
		q.EnqueueMessages("a")
		synctest.Wait()
		f.take()
		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Run returned %v while a run was active", err)
		default:
		}
		q.EnqueueMessages("b")
		f.idle(t, "a") // the turn ends: closed, and Run returns
		synctest.Wait()
		wantEvents(t, f, "close a")
		if err := <-done; err != nil {
			t.Fatalf("Run: got %v; want nil", err)
		}
		if err := q.Run(context.Background()); !errors.Is(err, ErrShutdown) {
			t.Fatalf("Run after shutdown: got %v; want ErrShutdown", err)
		}
	})
}

// TestConcurrentUse hammers the queue from many goroutines; run it with
// -race. Every task must run exactly once, no group may run twice at once,
// the cap must hold, and every group must get a run that started after its
// last enqueue.
func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			groups  = 8
			workers = 32
			ops     = 200
			maxRuns = 3
		)
		f := newFake(maxRuns)
		var seq atomic.Int64
		var lastStart [groups]atomic.Int64
		var lastRun [groups]atomic.Pointer[Run] // reported on after the run ended
		f.auto = func(c *fakeCall) error {
			var i int
			fmt.Sscanf(c.group, "g%d", &i)
			lastStart[i].Store(seq.Add(1))
			lastRun[i].Store(c.run)
			c.run.MarkIdle()
			return nil
		}
		q, _ := startQueue(t, Config{MaxConcurrent: maxRuns}, f)

		var lastEnqueue [groups]atomic.Int64
		var tasks atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range ops {
					g := rand.IntN(groups)
					name := fmt.Sprintf("g%d", g)
					switch rand.IntN(5) {
					case 0, 1:
						lastEnqueue[g].Store(seq.Add(1))
						q.EnqueueMessages(name)
					case 2:
						tasks.Add(1)
						q.EnqueueTask(name, TaskRef[string]{ID: fmt.Sprintf("w%d-%d", w, i)})
					case 3:
						if r := lastRun[g].Load(); r != nil {
							r.MarkIdle()
							r.MarkBusy()
							r.MarkIdle()
							r.MarkClosing()
						}
					case 4:
						_ = q.Status()
						_, _ = q.Active(name)
					}
				}
			})
		}
		wg.Wait()
		synctest.Wait()

		f.checkLimits(t)
		f.mu.Lock()
		defer f.mu.Unlock()
		if int64(len(f.ranTasks)) != tasks.Load() {
			t.Errorf("distinct tasks run: got %d; want %d", len(f.ranTasks), tasks.Load())
		}
		for id, n := range f.ranTasks {
			if n != 1 {
				t.Errorf("task %s ran %d times; want 1", id, n)
			}
		}
		for g := range groups {
			if e, s := lastEnqueue[g].Load(), lastStart[g].Load(); e > 0 && s < e {
				t.Errorf("group g%d: last enqueue at %d, last run started at %d; want a run after the enqueue", g, e, s)
			}
		}
		if st := q.Status(); st.Running != 0 || len(st.Waiting) != 0 {
			t.Errorf("status at rest: got running %d waiting %q; want idle", st.Running, st.Waiting)
		}
	})
}

// A run object speaks for its own run only: the reports of a run that has
// ended do not touch the group's next run (it stays busy and is never the
// one closed for another group).
func TestEndedRunCannotChangeNextRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(1)
		q, _ := startQueue(t, Config{MaxConcurrent: 1}, f)
		startA(t, q)
		first := f.runOf(t, "a")
		q.EnqueueMessages("a") // a follow-up run waits for the first
		f.end(t, "a", nil)
		wantEvents(t, f, "run a messages", "run a messages")
		f.runOf(t, "a")

		if first.MarkIdle() {
			t.Fatal("the ended run's MarkIdle: got true; want false")
		}
		if st := q.Status().Groups[0]; st.Idle || st.Closing {
			t.Fatalf("next run after the ended run reported idle: idle %v, closing %v; want busy, not closing", st.Idle, st.Closing)
		}
		q.EnqueueMessages("b") // waits for the one slot: busy a is not closed
		synctest.Wait()
		wantEvents(t, f)
		first.MarkClosing()
		first.MarkBusy()
		if st := q.Status().Groups[0]; st.Idle || st.Closing {
			t.Fatalf("next run after the ended run's reports: idle %v, closing %v; want busy, not closing", st.Idle, st.Closing)
		}

		// The next run's own object still reports for it.
		f.idle(t, "a")
		synctest.Wait()
		wantEvents(t, f, "close a", "run b messages")
	})
}

// The queue asks an idle holder for its slot, but the holder's agent may
// take new input before the ask reaches it: the holder ignores the ask,
// the slot counts as busy again, and the next idle container is asked.
func TestAskedSlotTakenBackByBusyHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2)
		q, _ := startQueue(t, Config{MaxConcurrent: 2}, f)
		q.EnqueueMessages("a")
		q.EnqueueMessages("b")
		synctest.Wait()
		f.take()
		gate := make(chan struct{})
		f.mu.Lock()
		f.closeGate = gate
		f.mu.Unlock()
		f.idle(t, "a")
		q.EnqueueMessages("c") // asks idle a for its slot
		synctest.Wait()
		f.busy(t, "a") // input reaches a's agent before the ask does
		close(gate)
		synctest.Wait()
		wantEvents(t, f, "close a (busy: ignored)")
		if st := q.Status(); !slices.Equal(st.Waiting, []string{"c"}) {
			t.Fatalf("waiting: got %q; want [c]", st.Waiting)
		}
		f.idle(t, "b")
		synctest.Wait()
		wantEvents(t, f, "close b", "run c messages")
		f.checkLimits(t)
	})
}

// Position tells how many groups wait for a slot before a group's next
// run: its place in line, the end of the line when every slot is taken and
// it has not asked yet, and nothing when it runs or a slot is free.
func TestPosition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(1)
		q, _ := startQueue(t, Config{MaxConcurrent: 1}, f)
		if _, ok := q.Position("a"); ok {
			t.Fatal("a free slot: a is queued; want not")
		}
		startA(t, q)
		q.EnqueueMessages("b")
		q.EnqueueMessages("c")
		synctest.Wait()
		for name, want := range map[string]int{"b": 0, "c": 1, "d": 2} {
			if got, ok := q.Position(name); !ok || got != want {
				t.Errorf("Position(%s): got (%d, %v); want (%d, true)", name, got, ok, want)
			}
		}
		if _, ok := q.Position("a"); ok {
			t.Error("the running group a is queued; want not")
		}
	})
}
