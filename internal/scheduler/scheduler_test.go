package scheduler

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// The tests run inside testing/synctest bubbles: timers and time.Now are
// fake, time.Sleep advances the fake clock at once, and synctest.Wait waits
// until the scheduler has nothing left to do at the current instant.

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("load Europe/Berlin: %v", err)
	}
	return loc
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// enqueued is one EnqueueTask call as the fake queue saw it.
type enqueued struct {
	task store.Task
	at   time.Time // the scheduler's clock at the call
}

// fakeQueue records EnqueueTask calls. With a database, each task's run
// ends at once and is recorded, as the runner records a run that ended.
type fakeQueue struct {
	now func() time.Time
	db  *store.DB
	mu  sync.Mutex
	got []enqueued
}

func (q *fakeQueue) EnqueueTask(t store.Task) {
	q.mu.Lock()
	q.got = append(q.got, enqueued{task: t, at: q.now()})
	q.mu.Unlock()
	if q.db != nil {
		if err := q.db.Tasks.FinishRun(context.Background(), store.TaskRun{TaskID: t.ID, StartedAt: q.now(), Status: store.RunOK}); err != nil {
			panic(err)
		}
	}
}

func (q *fakeQueue) calls() []enqueued {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]enqueued(nil), q.got...)
}

// harness is a database, a clock reading base when the bubble starts, and
// (after start) a running scheduler.
type harness struct {
	t    *testing.T
	db   *store.DB
	loc  *time.Location
	off  atomic.Int64 // wall clock = bubble clock + off (ns)
	s    *Scheduler
	fake *fakeQueue
}

func newHarness(t *testing.T, base time.Time, loc *time.Location) *harness {
	t.Helper()
	db := storetest.OpenHome(t, t.TempDir())
	h := &harness{t: t, db: db, loc: loc}
	h.off.Store(int64(time.Until(base)))
	for _, f := range []store.Folder{"main", "family"} {
		if _, err := db.Groups.Add(context.Background(), store.Group{
			Chat: store.ChatID("local:" + f), Folder: f, Name: string(f), Trigger: "@Andy", IsMain: f == "main",
		}); err != nil {
			t.Fatalf("add group %s: %v", f, err)
		}
	}
	return h
}

func (h *harness) now() time.Time { return time.Now().Add(time.Duration(h.off.Load())) }

// start runs a scheduler with fake queue q (a fakeQueue when nil) until the
// test ends, and checks that Run then returns nil.
func (h *harness) start(q Enqueuer, maxSleep time.Duration) {
	h.t.Helper()
	if q == nil {
		h.fake = &fakeQueue{now: h.now, db: h.db}
		q = h.fake
	}
	h.s = New(h.db, q, h.loc, zerolog.Nop(), h.now)
	if maxSleep > 0 {
		h.s.maxSleep = maxSleep
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.s.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Run returned %v; want nil after the context ends", err)
		}
	})
	synctest.Wait()
}

// advance moves the clock to at and lets the scheduler settle.
func (h *harness) advance(at time.Time) {
	h.t.Helper()
	if d := at.Sub(h.now()); d > 0 {
		time.Sleep(d)
	}
	synctest.Wait()
}

func (h *harness) addTask(folder store.Folder, kind store.TaskKind, value string, next *time.Time) store.Task {
	h.t.Helper()
	if next == nil {
		sc, err := schedule.Parse(schedule.Kind(kind), value, h.loc)
		if err != nil {
			h.t.Fatalf("parse %s %q: %v", kind, value, err)
		}
		first := sc.First(h.now(), h.loc)
		next = &first
	}
	task, err := h.db.Tasks.Create(context.Background(), store.Task{
		Folder: folder, Chat: store.ChatID("local:" + folder), Prompt: "do the thing",
		Kind: kind, Value: value, NextRun: next,
	})
	if err != nil {
		h.t.Fatalf("create task: %v", err)
	}
	return task
}

func (h *harness) task(id store.TaskID) store.Task {
	h.t.Helper()
	task, err := h.db.Tasks.Get(context.Background(), id)
	if err != nil {
		h.t.Fatalf("get task %s: %v", id, err)
	}
	return task
}

func fmtTimes(ts []time.Time, loc *time.Location) string {
	var s []string
	for _, v := range ts {
		s = append(s, v.In(loc).Format(time.RFC3339))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestRunTimes(t *testing.T) {
	tests := []struct {
		name     string
		base     string // the clock when the scheduler starts
		kind     store.TaskKind
		value    string
		nextRun  string // stored next run; empty: schedule.First(base)
		until    string
		want     []string // when the task was handed to the queue
		wantNext string   // the task's next run afterwards; empty: none
	}{
		{
			name: "cron 09:00 Berlin across spring forward", kind: store.TaskCron, value: "0 9 * * *",
			base: "2026-03-28T08:30:00+01:00", until: "2026-03-30T09:30:00+02:00",
			want:     []string{"2026-03-28T09:00:00+01:00", "2026-03-29T09:00:00+02:00", "2026-03-30T09:00:00+02:00"},
			wantNext: "2026-03-31T09:00:00+02:00",
		},
		{
			name: "cron 09:00 Berlin across fall back", kind: store.TaskCron, value: "0 9 * * *",
			base: "2026-10-24T08:30:00+02:00", until: "2026-10-26T09:30:00+01:00",
			want:     []string{"2026-10-24T09:00:00+02:00", "2026-10-25T09:00:00+01:00", "2026-10-26T09:00:00+01:00"},
			wantNext: "2026-10-27T09:00:00+01:00",
		},
		{
			name: "cron weekdays skips the weekend", kind: store.TaskCron, value: "30 7 * * 1-5",
			base: "2026-11-20T07:00:00+01:00", until: "2026-11-23T08:00:00+01:00", // Friday to Monday
			want:     []string{"2026-11-20T07:30:00+01:00", "2026-11-23T07:30:00+01:00"},
			wantNext: "2026-11-24T07:30:00+01:00",
		},
		{
			name: "interval stays anchored to its schedule after a late start", kind: store.TaskInterval, value: "1h",
			base: "2026-11-22T10:00:00+01:00", nextRun: "2026-11-22T09:35:00+01:00", until: "2026-11-22T12:00:00+01:00",
			// 25 minutes late: one catch-up run now, then 10:35, 11:35 — not 11:00, 12:00.
			want:     []string{"2026-11-22T10:00:00+01:00", "2026-11-22T10:35:00+01:00", "2026-11-22T11:35:00+01:00"},
			wantNext: "2026-11-22T12:35:00+01:00",
		},
		{
			name: "interval after downtime runs once, not once per missed slot", kind: store.TaskInterval, value: "10m",
			base: "2026-11-22T10:00:00+01:00", nextRun: "2026-11-22T07:05:00+01:00", until: "2026-11-22T10:04:00+01:00",
			want:     []string{"2026-11-22T10:00:00+01:00"},
			wantNext: "2026-11-22T10:05:00+01:00",
		},
		{
			name: "cron after downtime runs once, not once per missed slot", kind: store.TaskCron, value: "*/5 * * * *",
			base: "2026-11-22T10:02:00+01:00", nextRun: "2026-11-22T07:00:00+01:00", until: "2026-11-22T10:04:00+01:00",
			want:     []string{"2026-11-22T10:02:00+01:00"},
			wantNext: "2026-11-22T10:05:00+01:00",
		},
		{
			name: "once runs once and has no next run", kind: store.TaskOnce, value: "2026-11-22 12:00",
			base: "2026-11-22T10:00:00+01:00", until: "2026-11-25T10:00:00+01:00",
			want: []string{"2026-11-22T12:00:00+01:00"},
		},
		{
			name: "once overdue after downtime runs at start", kind: store.TaskOnce, value: "2026-11-22 08:00",
			base: "2026-11-22T10:00:00+01:00", until: "2026-11-22T11:00:00+01:00",
			want: []string{"2026-11-22T10:00:00+01:00"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loc := berlin(t)
				h := newHarness(t, mustTime(t, tt.base), loc)
				var next *time.Time
				if tt.nextRun != "" {
					v := mustTime(t, tt.nextRun)
					next = &v
				}
				task := h.addTask("family", tt.kind, tt.value, next)
				h.start(nil, 12*time.Hour)
				h.advance(mustTime(t, tt.until))

				var got []time.Time
				for _, c := range h.fake.calls() {
					if c.task.ID != task.ID {
						t.Errorf("enqueued task %s; want only %s", c.task.ID, task.ID)
					}
					got = append(got, c.at)
				}
				var want []time.Time
				for _, w := range tt.want {
					want = append(want, mustTime(t, w))
				}
				if fmtTimes(got, loc) != fmtTimes(want, loc) {
					t.Errorf("runs at %s; want %s", fmtTimes(got, loc), fmtTimes(want, loc))
				}

				stored := h.task(task.ID)
				switch {
				case tt.wantNext == "" && stored.NextRun != nil:
					t.Errorf("next run %s; want none", stored.NextRun.In(loc).Format(time.RFC3339))
				case tt.wantNext != "" && (stored.NextRun == nil || !stored.NextRun.Equal(mustTime(t, tt.wantNext))):
					t.Errorf("next run %v; want %s", stored.NextRun, tt.wantNext)
				}
				wantStatus := store.TaskActive
				if tt.kind == store.TaskOnce {
					wantStatus = store.TaskDone // its one run was recorded
				}
				if stored.Status != wantStatus {
					t.Errorf("status %s; want %s", stored.Status, wantStatus)
				}
			})
		})
	}
}

// The task handed to the queue already carries its advanced next run: the
// claim happened before the hand-over.
func TestClaimBeforeEnqueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		task := h.addTask("family", store.TaskInterval, "30m", &base)
		var seen store.Task
		var seenErr error
		q := enqueueFunc(func(tk store.Task) {
			// What the database says at hand-over time.
			seen, seenErr = h.db.Tasks.Get(context.Background(), tk.ID)
		})
		h.start(q, 0)
		want := base.Add(30 * time.Minute)
		if seenErr != nil {
			t.Fatalf("get task at hand-over: %v", seenErr)
		}
		if seen.ID != task.ID || seen.NextRun == nil || !seen.NextRun.Equal(want) {
			t.Fatalf("at hand-over the stored task was %+v; want next run %s already stored", seen, want)
		}
	})
}

type enqueueFunc func(store.Task)

func (f enqueueFunc) EnqueueTask(t store.Task) { f(t) }

// queueAdapter feeds claimed tasks into a real group queue, as the router does.
type queueAdapter struct {
	q     *groupqueue.Queue[store.Task]
	calls atomic.Int32
}

func (a *queueAdapter) EnqueueTask(t store.Task) {
	a.calls.Add(1)
	a.q.EnqueueTask(string(t.Folder), groupqueue.TaskRef[store.Task]{ID: string(t.ID), Task: t})
}

func TestRunOutlastingItsIntervalIsNotRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)

		var mu sync.Mutex
		var starts, active, maxActive int
		release := make(chan struct{})
		q, err := groupqueue.New(groupqueue.Config{}, groupqueue.Handlers[store.Task]{
			RunMessages: func(context.Context, *groupqueue.Run) error { return nil },
			CloseIdle:   func(string) {},
			RunTask: func(ctx context.Context, _ *groupqueue.Run, ref groupqueue.TaskRef[store.Task]) error {
				mu.Lock()
				starts++
				active++
				maxActive = max(maxActive, active)
				first := starts == 1
				mu.Unlock()
				if first { // the first run outlasts several intervals
					select {
					case <-release:
					case <-ctx.Done():
					}
				}
				mu.Lock()
				active--
				mu.Unlock()
				// As the runner does: the run is recorded when it ends.
				if err := h.db.Tasks.FinishRun(context.Background(), store.TaskRun{TaskID: ref.Task.ID, StartedAt: h.now(), Status: store.RunOK}); err != nil {
					t.Errorf("record the run: %v", err)
				}
				return nil
			},
		}, zerolog.Nop())
		if err != nil {
			t.Fatalf("groupqueue.New: %v", err)
		}
		qctx, qcancel := context.WithCancel(context.Background())
		qdone := make(chan error, 1)
		go func() { qdone <- q.Run(qctx) }()
		t.Cleanup(func() {
			qcancel()
			<-qdone
		})
		var releaseOnce sync.Once
		t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

		task := h.addTask("family", store.TaskInterval, "1m", &base)
		adapter := &queueAdapter{q: q}
		h.start(adapter, 0)

		// Tasks changing elsewhere must not make the running task due again.
		for range 5 {
			h.s.Wake()
			synctest.Wait()
		}
		h.advance(base.Add(30 * time.Second))
		if n := adapter.calls.Load(); n != 1 {
			t.Fatalf("handed over %d times within the first interval; want 1", n)
		}

		h.advance(base.Add(3*time.Minute + 30*time.Second))
		mu.Lock()
		gotStarts, gotMax := starts, maxActive
		mu.Unlock()
		if gotStarts != 1 || gotMax != 1 {
			t.Errorf("while the first run lasted 3.5 intervals: %d runs started, %d at once; want 1 and 1", gotStarts, gotMax)
		}
		if next := h.task(task.ID).NextRun; next == nil || !next.Equal(base.Add(4*time.Minute)) {
			t.Errorf("next run %v; want %s (each slot claimed once)", next, base.Add(4*time.Minute))
		}

		releaseOnce.Do(func() { close(release) })
		h.advance(base.Add(4*time.Minute + time.Second))
		mu.Lock()
		gotStarts, gotMax = starts, maxActive
		mu.Unlock()
		if gotStarts != 2 || gotMax != 1 {
			t.Errorf("after the first run ended: %d runs started, %d at once; want 2 and 1", gotStarts, gotMax)
		}
	})
}

func TestRemovedGroupsTaskIsPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		due := base.Add(time.Minute)
		gone := h.addTask("family", store.TaskCron, "*/10 * * * *", &due)
		kept := h.addTask("main", store.TaskCron, "*/10 * * * *", &due)
		if err := h.db.Groups.Remove(context.Background(), "family"); err != nil {
			t.Fatalf("remove group: %v", err)
		}
		h.start(nil, 0)
		h.advance(base.Add(3 * time.Hour))

		for _, c := range h.fake.calls() {
			if c.task.ID == gone.ID {
				t.Fatalf("the removed group's task was handed to the queue at %s", c.at)
			}
		}
		if n := len(h.fake.calls()); n != 19 {
			t.Errorf("the main group's task ran %d times in three hours; want 19 (10:01, then every 10 minutes)", n)
		}
		got := h.task(gone.ID)
		if got.Status != store.TaskPaused {
			t.Errorf("status %s; want paused", got.Status)
		}
		if want := "group family was removed; task paused"; got.LastResult != want {
			t.Errorf("last result %q; want %q", got.LastResult, want)
		}
		if runs, _ := h.db.Tasks.Runs(context.Background(), gone.ID, 0); len(runs) != 0 {
			t.Errorf("%d runs logged for the paused task; want none", len(runs))
		}
		if st := h.task(kept.ID).Status; st != store.TaskActive {
			t.Errorf("main's task status %s; want active", st)
		}
	})
}

func TestInvalidStoredScheduleIsPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		task := h.addTask("family", store.TaskCron, "61 * * * *", &base)
		h.start(nil, 0)
		h.advance(base.Add(time.Hour))
		if n := len(h.fake.calls()); n != 0 {
			t.Errorf("handed over %d times; want 0", n)
		}
		got := h.task(task.ID)
		if got.Status != store.TaskPaused || !strings.Contains(got.LastResult, "invalid cron expression") {
			t.Errorf("status %s, last result %q; want paused with the parser's reason", got.Status, got.LastResult)
		}
	})
}

func TestWakeRecomputesTheSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		later := base.Add(5 * time.Hour)
		h.addTask("main", store.TaskOnce, later.Format(time.RFC3339), &later)
		h.start(nil, 24*time.Hour) // asleep until 15:00

		soon := base.Add(10 * time.Minute)
		task := h.addTask("family", store.TaskOnce, soon.Format(time.RFC3339), &soon)
		h.s.Wake()
		h.advance(soon)

		calls := h.fake.calls()
		if len(calls) != 1 || calls[0].task.ID != task.ID || !calls[0].at.Equal(soon) {
			t.Fatalf("got %d hand-overs %+v; want the new task at %s", len(calls), calls, soon)
		}
	})
}

// Without a Wake, a sooner task is still found within MaxSleep, and so is a
// task that became due through a jump of the wall clock.
func TestSleepIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		due := base.Add(2 * time.Hour)
		task := h.addTask("family", store.TaskOnce, due.Format(time.RFC3339), &due)
		h.start(nil, 0)

		h.advance(base.Add(10 * time.Second))
		h.off.Add(int64(2 * time.Hour)) // the machine slept for two hours
		jumped := h.now()
		h.advance(jumped.Add(MaxSleep))

		calls := h.fake.calls()
		if len(calls) != 1 || calls[0].task.ID != task.ID {
			t.Fatalf("got %d hand-overs; want the task once", len(calls))
		}
		if late := calls[0].at.Sub(jumped); late > MaxSleep {
			t.Errorf("ran %s after the clock jump; want at most %s", late, MaxSleep)
		}
	})
}

func TestRunClosesInterruptedRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		task := h.addTask("family", store.TaskOnce, base.Format(time.RFC3339), &base)
		// A previous daemon claimed it and stopped during the run.
		if _, err := h.db.Tasks.ClaimDue(context.Background(), base, func(store.Task) store.Claim { return store.Claim{} }); err != nil {
			t.Fatalf("claim: %v", err)
		}
		h.start(nil, 0)
		h.advance(base.Add(time.Hour))

		if n := len(h.fake.calls()); n != 0 {
			t.Errorf("handed over %d times; want 0 (a claimed task never runs twice)", n)
		}
		got := h.task(task.ID)
		if got.Status != store.TaskDone || !strings.Contains(got.LastResult, "interrupted") {
			t.Errorf("status %s, last result %q; want done, interrupted", got.Status, got.LastResult)
		}
	})
}

// kill -9 during a cron task's run: at the next start its run log has an
// "interrupted" run, the chat one notice (a second start adds none), and the
// task runs again at its next slot.
func TestRunClosesInterruptedRecurringRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		task := h.addTask("family", store.TaskCron, "0 * * * *", &base)
		// A previous daemon claimed the 10:00 run and died during it.
		prev := New(h.db, enqueueFunc(func(store.Task) {}), time.UTC, zerolog.Nop(), h.now)
		if err := prev.claim(ctx); err != nil {
			t.Fatalf("claim: %v", err)
		}
		h.start(nil, 0)

		runs, err := h.db.Tasks.Runs(ctx, task.ID, 0)
		if err != nil || len(runs) != 1 || runs[0].Status != store.RunError || !strings.Contains(runs[0].Error, "interrupted") {
			t.Fatalf("runs %+v, %v; want one interrupted error run", runs, err)
		}
		got := h.task(task.ID)
		if got.Status != store.TaskActive || !strings.Contains(got.LastResult, "interrupted") {
			t.Errorf("task %+v; want active, interrupted as last result", got)
		}
		out, _ := h.db.Outbox.Pending(ctx, 0)
		if len(out) != 1 || out[0].Chat != "local:family" || out[0].Origin != store.OriginNotice ||
			!strings.Contains(out[0].Text, string(task.ID)) || !strings.Contains(out[0].Text, "interrupted") {
			t.Fatalf("outbox %+v; want one notice naming the task in local:family", out)
		}
		// Another start (Recover on a fresh scheduler) finds nothing.
		if err := New(h.db, enqueueFunc(func(store.Task) {}), time.UTC, zerolog.Nop(), h.now).Recover(ctx); err != nil {
			t.Fatal(err)
		}
		if out, _ := h.db.Outbox.Pending(ctx, 0); len(out) != 1 {
			t.Errorf("%d outbox rows after another start; want 1", len(out))
		}

		h.advance(base.Add(time.Hour))
		if calls := h.fake.calls(); len(calls) != 1 || calls[0].task.ID != task.ID {
			t.Errorf("hand-overs %+v; want the 11:00 run", calls)
		}
	})
}

// A task whose runs were failing already gets no notice for an interrupted
// run: the chat was told when it started failing.
func TestInterruptedNoticeOnlyWhenNotFailingAlready(t *testing.T) {
	if got := interruptedNotice(store.Task{ID: "task-1", LastResult: "error: container crashed"}); got != "" {
		t.Errorf("notice for a failing task = %q; want none", got)
	}
	if got := interruptedNotice(store.Task{ID: "task-1", LastResult: "all good"}); !strings.Contains(got, "task-1") {
		t.Errorf("notice = %q; want one naming the task", got)
	}
}

func TestRunFailsWhenTheDatabaseIsUnusable(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "bridged.db"), zerolog.Nop())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	db.Close()
	s := New(db, enqueueFunc(func(store.Task) {}), time.UTC, zerolog.Nop(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Run(ctx); err == nil {
		t.Fatal("Run on a closed database returned nil; want an error")
	}
}
