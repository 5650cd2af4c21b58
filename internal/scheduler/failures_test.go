package scheduler

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// A task whose run is still queued (waiting for its group's turn) when its
// next slots come is not handed to the queue again: the slots are skipped
// and the task runs at its first slot after that run ended.
func TestQueuedTaskIsNotQueuedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		task := h.addTask("family", store.TaskInterval, "1m", &base)
		q := &fakeQueue{now: h.now} // runs nothing: the task stays queued
		h.start(q, 0)

		h.advance(base.Add(3*time.Minute + 30*time.Second))
		if n := len(q.calls()); n != 1 {
			t.Fatalf("the queued task was handed to the queue %d times in 3.5 minutes; want once (it is still queued)", n)
		}
		if next := h.task(task.ID).NextRun; next == nil || !next.Equal(base.Add(4*time.Minute)) {
			t.Errorf("next run %v; want %s (the skipped slots are past)", next, base.Add(4*time.Minute))
		}
		runs, err := h.db.Tasks.Runs(context.Background(), task.ID, 0)
		if err != nil || len(runs) != 1 || runs[0].Status != store.RunRunning {
			t.Fatalf("run log %+v, %v; want the one queued run", runs, err)
		}

		// The run ends: the task is queued again at its next slot.
		if err := h.db.Tasks.FinishRun(context.Background(), store.TaskRun{TaskID: task.ID, StartedAt: h.now(), Status: store.RunOK}); err != nil {
			t.Fatal(err)
		}
		h.advance(base.Add(4*time.Minute + time.Second))
		calls := q.calls()
		if len(calls) != 2 || !calls[1].at.Equal(base.Add(4*time.Minute)) {
			t.Fatalf("handed over at %v; want a second time at %s, once the run ended", calls, base.Add(4*time.Minute))
		}
	})
}

// failingQueue runs every task it is handed at once, and each run fails, as
// the runner records a failed run (pausing at pauseAfter failures in a row).
type failingQueue struct {
	fakeQueue  // without a database: it only records the hand-overs
	db         *store.DB
	pauseAfter int
}

func (q *failingQueue) EnqueueTask(t store.Task) {
	q.fakeQueue.EnqueueTask(t)
	if err := q.db.Tasks.FinishRun(context.Background(), store.TaskRun{
		TaskID: t.ID, StartedAt: q.now(), Status: store.RunError, Error: "boom", PauseAfter: q.pauseAfter,
	}); err != nil {
		panic(err)
	}
}

// A task that keeps failing is retried less and less often (every minute
// due: 1, 2, 4, 8 minutes apart), pauses itself at its fifth failure in a
// row, stays paused, and runs again with a fresh count once resumed.
func TestFailingTaskBacksOffAndPausesItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustTime(t, "2026-11-22T10:00:00Z")
		h := newHarness(t, base, time.UTC)
		task := h.addTask("family", store.TaskInterval, "1m", &base)
		q := &failingQueue{fakeQueue: fakeQueue{now: h.now}, db: h.db, pauseAfter: 5}
		h.start(q, 0)

		h.advance(base.Add(2 * time.Hour))
		var got []time.Time
		for _, c := range q.calls() {
			got = append(got, c.at)
		}
		want := []time.Time{base, base.Add(time.Minute), base.Add(3 * time.Minute), base.Add(7 * time.Minute), base.Add(15 * time.Minute)}
		if fmtTimes(got, time.UTC) != fmtTimes(want, time.UTC) {
			t.Fatalf("the failing task ran at %s; want %s (backing off, then paused)", fmtTimes(got, time.UTC), fmtTimes(want, time.UTC))
		}
		paused := h.task(task.ID)
		if paused.Status != store.TaskPaused || !paused.PausedByFailures || paused.Failures != 5 {
			t.Fatalf("after five failures: status %s, paused by failures %v, failures %d; want paused by its 5 failures",
				paused.Status, paused.PausedByFailures, paused.Failures)
		}

		// Resumed (as `bridged tasks resume` does): a fresh count, and it
		// runs at its next slot.
		var resumed store.Task
		if err := h.db.Tx(context.Background(), func(tx *store.Tx) error {
			var err error
			resumed, err = rules.ResumeTask(context.Background(), tx, paused, h.now(), time.UTC)
			return err
		}); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if resumed.Status != store.TaskActive || resumed.Failures != 0 || resumed.PausedByFailures {
			t.Fatalf("resumed task %+v; want active with no failures", resumed)
		}
		stored := h.task(task.ID)
		if stored.Status != store.TaskActive || stored.Failures != 0 || stored.PausedByFailures {
			t.Fatalf("stored after resume: status %s, failures %d, paused by failures %v; want active, 0, false",
				stored.Status, stored.Failures, stored.PausedByFailures)
		}
		h.s.Wake()
		h.advance(base.Add(2*time.Hour + time.Minute + time.Second))
		if n := len(q.calls()); n != 6 {
			t.Fatalf("after the resume the task was handed over %d times in all; want 6 (once more at its next slot)", n)
		}
		if again := h.task(task.ID); again.Status != store.TaskActive || again.Failures != 1 {
			t.Errorf("after one more failure: status %s, failures %d; want active, 1 (its count started again)", again.Status, again.Failures)
		}
	})
}

// Runs that were not the task's own failure (skipped for the budget, dropped
// at shutdown, cut off by a restart) do not count toward the pause; a good
// run sets the count back to 0.
func TestOnlyOwnFailuresCount(t *testing.T) {
	ctx := context.Background()
	base := mustTime(t, "2026-11-22T10:00:00Z")
	h := newHarness(t, base, time.UTC)
	task := h.addTask("family", store.TaskCron, "0 9 * * *", nil)
	finish := func(r store.TaskRun) {
		t.Helper()
		r.TaskID, r.PauseAfter = task.ID, 2
		if err := h.db.Tasks.FinishRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	finish(store.TaskRun{Status: store.RunError, Error: "boom"})
	for range 3 {
		finish(store.TaskRun{Status: store.RunError, Error: "skipped: budget", NotCounted: true})
	}
	if got := h.task(task.ID); got.Status != store.TaskActive || got.Failures != 1 {
		t.Fatalf("after one failure and three uncounted ones: status %s, failures %d; want active, 1", got.Status, got.Failures)
	}
	finish(store.TaskRun{Status: store.RunOK, Result: "fine"})
	finish(store.TaskRun{Status: store.RunError, Error: "boom"})
	if got := h.task(task.ID); got.Status != store.TaskActive || got.Failures != 1 {
		t.Fatalf("after a good run and one failure: status %s, failures %d; want active, 1", got.Status, got.Failures)
	}
	finish(store.TaskRun{Status: store.RunError, Error: "boom"})
	if got := h.task(task.ID); got.Status != store.TaskPaused || !got.PausedByFailures || got.Failures != 2 {
		t.Fatalf("after two failures in a row: status %s, paused by failures %v, failures %d; want paused by 2 failures",
			got.Status, got.PausedByFailures, got.Failures)
	}
}
