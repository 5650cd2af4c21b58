package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func ptr(t time.Time) *time.Time { return &t }

func newTask(t *testing.T, db *DB, kind TaskKind, next *time.Time) Task {
	t.Helper()
	task, err := db.Tasks.Create(context.Background(), Task{
		Folder: "main", Chat: "local:main", Prompt: "water the plants", Kind: kind, Value: "v", NextRun: next,
	})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	return task
}

func TestCreateTask(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	task := newTask(t, db, TaskCron, ptr(t0.Add(time.Hour)))
	if len(task.ID) < len("task-")+8 || task.ID[:5] != "task-" {
		t.Errorf("task id %q; want task-<random>", task.ID)
	}
	got, err := db.Tasks.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ContextMode != ContextIsolated || got.Status != TaskActive || !got.NextRun.Equal(t0.Add(time.Hour)) || got.LastRun != nil || !got.CreatedAt.Equal(t0) {
		t.Errorf("stored task %+v; want isolated, active, next run in an hour, no last run", got)
	}
	if other := newTask(t, db, TaskCron, nil); other.ID == task.ID {
		t.Errorf("two tasks got id %s", task.ID)
	}

	bad := []Task{
		{Folder: "../x", Chat: "c", Prompt: "p", Kind: TaskOnce, Value: "v"},
		{Folder: "main", Prompt: "p", Kind: TaskOnce, Value: "v"},
		{Folder: "main", Chat: "c", Prompt: " ", Kind: TaskOnce, Value: "v"},
		{Folder: "main", Chat: "c", Prompt: "p", Kind: "hourly", Value: "v"},
		{Folder: "main", Chat: "c", Prompt: "p", Kind: TaskOnce, Value: ""},
		{Folder: "main", Chat: "c", Prompt: "p", Kind: TaskOnce, Value: "v", ContextMode: "shared"},
	}
	for _, b := range bad {
		if _, err := db.Tasks.Create(ctx, b); err == nil {
			t.Errorf("CreateTask(%+v) = nil; want an error", b)
		}
	}
	if all, _ := db.Tasks.List(ctx, ""); len(all) != 2 {
		t.Errorf("ListTasks = %d tasks; want 2", len(all))
	}
}

// Two schedulers claiming at the same moment, in one process or in two,
// claim each due task exactly once.
func TestClaimDueConcurrent(t *testing.T) {
	for _, twoHandles := range []bool{false, true} {
		t.Run(fmt.Sprintf("two handles %v", twoHandles), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "bridged.db")
			a := openAt(t, path)
			b := a
			if twoHandles {
				b = openAt(t, path)
			}
			const tasks = 20
			for i := range tasks {
				kind := TaskOnce
				if i%2 == 0 {
					kind = TaskInterval
				}
				newTask(t, a, kind, ptr(t0.Add(-time.Duration(i)*time.Minute)))
			}
			newTask(t, a, TaskOnce, ptr(t0.Add(time.Minute))) // not due

			next := func(task Task) Claim {
				if task.Kind == TaskOnce {
					return Claim{}
				}
				return Claim{Next: ptr(t0.Add(time.Hour))}
			}
			start := make(chan struct{})
			results := make([][]Task, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, db := range []*DB{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					results[i], errs[i] = db.Tasks.ClaimDue(ctx, t0, next)
				}()
			}
			close(start)
			wg.Wait()
			seen := map[TaskID]int{}
			for i := range 2 {
				if errs[i] != nil {
					t.Fatalf("ClaimDue %d: %v", i, errs[i])
				}
				for _, task := range results[i] {
					seen[task.ID]++
				}
			}
			if len(seen) != tasks {
				t.Errorf("%d distinct tasks claimed; want %d", len(seen), tasks)
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("task %s claimed %d times; want once", id, n)
				}
			}
			if again, _ := a.Tasks.ClaimDue(ctx, t0, next); len(again) != 0 {
				t.Errorf("third ClaimDue claimed %d tasks; want 0", len(again))
			}
		})
	}
}

func TestClaimDueAndFinish(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	once := newTask(t, db, TaskOnce, ptr(t0.Add(-time.Minute)))
	every := newTask(t, db, TaskInterval, ptr(t0))
	later := newTask(t, db, TaskCron, ptr(t0.Add(2*time.Hour)))
	paused := newTask(t, db, TaskCron, ptr(t0.Add(-time.Hour)))
	if err := db.Tasks.Pause(ctx, paused.ID, "group removed"); err != nil {
		t.Fatal(err)
	}

	if n, _ := db.Tasks.NextDue(ctx); n == nil || !n.Equal(t0.Add(-time.Minute)) {
		t.Errorf("NextDue = %v; want %s (paused tasks ignored)", n, t0.Add(-time.Minute))
	}
	var sawDue []time.Time
	claimed, err := db.Tasks.ClaimDue(ctx, t0, func(task Task) Claim {
		sawDue = append(sawDue, *task.NextRun)
		if task.Kind == TaskOnce {
			return Claim{}
		}
		return Claim{Next: ptr(task.NextRun.Add(time.Hour))}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 2 || claimed[0].ID != once.ID || claimed[1].ID != every.ID {
		t.Fatalf("claimed %+v; want once then every", claimed)
	}
	if !sawDue[0].Equal(t0.Add(-time.Minute)) || !sawDue[1].Equal(t0) {
		t.Errorf("next() saw due times %v; want the stored next runs", sawDue)
	}
	if claimed[0].Status != TaskRunning || claimed[0].NextRun != nil {
		t.Errorf("claimed once task %+v; want running with no next run", claimed[0])
	}
	if claimed[1].Status != TaskActive || !claimed[1].NextRun.Equal(t0.Add(time.Hour)) {
		t.Errorf("claimed interval task %+v; want active, next run %s", claimed[1], t0.Add(time.Hour))
	}
	if n, _ := db.Tasks.NextDue(ctx); n == nil || !n.Equal(t0.Add(time.Hour)) {
		t.Errorf("NextDue after claim = %v; want %s", n, t0.Add(time.Hour))
	}

	for _, r := range []TaskRun{
		{TaskID: once.ID, StartedAt: t0, Duration: 1500 * time.Millisecond, Status: RunOK, Result: "watered", CostUSD: 0.1},
		{TaskID: every.ID, StartedAt: t0, Duration: time.Second, Status: RunError, Error: "container crashed"},
	} {
		if err := db.Tasks.FinishRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := db.Tasks.Get(ctx, once.ID)
	if got.Status != TaskDone || got.LastResult != "watered" || got.LastRun == nil || !got.LastRun.Equal(t0) {
		t.Errorf("once task after run %+v; want done, watered, last run %s", got, t0)
	}
	got, _ = db.Tasks.Get(ctx, every.ID)
	if got.Status != TaskActive || got.LastResult != "error: container crashed" {
		t.Errorf("interval task after failed run %+v; want still active, error result", got)
	}
	runs, _ := db.Tasks.Runs(ctx, once.ID, 10)
	want := TaskRun{ID: runs[0].ID, TaskID: once.ID, StartedAt: t0, Duration: 1500 * time.Millisecond, Status: RunOK, Result: "watered", CostUSD: 0.1}
	if len(runs) != 1 || runs[0] != want {
		t.Errorf("ListTaskRuns = %+v; want [%+v]", runs, want)
	}
	if got, _ := db.Tasks.Get(ctx, later.ID); got.Status != TaskActive || got.LastRun != nil {
		t.Errorf("task not yet due was touched: %+v", got)
	}
	if got, _ := db.Tasks.Get(ctx, paused.ID); got.Status != TaskPaused || got.LastResult != "group removed" {
		t.Errorf("paused task %+v; want paused with its reason", got)
	}
	if err := db.Tasks.FinishRun(ctx, TaskRun{TaskID: once.ID, Status: "meh"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("FinishTaskRun with status meh = %v; want ErrInvalid", err)
	}
}

// Cancelling a task deletes it and keeps its run log: the finished runs as
// they were, and a run in flight closed as cancelled (its own end, later,
// records nothing). A new task never takes a cancelled one's id.
func TestDeleteTaskKeepsItsRuns(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	task := newTask(t, db, TaskCron, ptr(t0))
	if err := db.Tasks.FinishRun(ctx, TaskRun{TaskID: task.ID, StartedAt: t0, Duration: time.Second, Status: RunOK, Result: "fine"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO task_runs (task_id, started_at, duration_ms, status) VALUES (?, ?, 0, 'running')`,
		task.ID, toMS(t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := db.Tasks.Delete(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Tasks.Get(ctx, task.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetTask after delete = %v; want ErrNotFound", err)
	}
	runs, err := db.Tasks.Runs(ctx, task.ID, 0)
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs after cancel: %+v, %v; want both kept", runs, err)
	}
	if r := runs[0]; r.Status != RunError || !strings.Contains(r.Error, "cancelled") || !r.StartedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("the run in flight became %+v; want an error run saying it was cancelled, from its start", r)
	}
	if r := runs[1]; r.Status != RunOK || r.Result != "fine" || r.Duration != time.Second {
		t.Errorf("the finished run became %+v; want it as it was", r)
	}
	// A run that ends after the task was cancelled records nothing.
	if err := db.Tasks.FinishRun(ctx, TaskRun{TaskID: task.ID, StartedAt: t0, Status: RunOK}); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishTaskRun of a deleted task = %v; want ErrNotFound", err)
	}
	if n := count(t, db, "task_runs", ""); n != 2 {
		t.Errorf("%d runs after the late end; want 2", n)
	}
	if err := db.Tasks.Delete(ctx, task.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeleteTask = %v; want ErrNotFound", err)
	}
	// Nothing is left in flight for the next start to close.
	if closed, err := db.Tasks.FailInterrupted(ctx, nil); err != nil || len(closed) != 0 {
		t.Errorf("FailInterrupted after the cancel: %v, %v; want nothing to close", closed, err)
	}
}

func TestUpdateTaskAndStatus(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	task := newTask(t, db, TaskCron, ptr(t0))
	task.Prompt, task.Kind, task.Value, task.NextRun = "new prompt", TaskInterval, "2h", ptr(t0.Add(2*time.Hour))
	if err := db.Tasks.Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Tasks.Get(ctx, task.ID)
	if got.Prompt != "new prompt" || got.Kind != TaskInterval || got.Value != "2h" || !got.NextRun.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("updated task %+v", got)
	}
	if err := db.Tasks.SetStatus(ctx, task.ID, TaskPaused); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Tasks.Get(ctx, task.ID); got.Status != TaskPaused {
		t.Errorf("status %s; want paused", got.Status)
	}
	if err := db.Tasks.SetStatus(ctx, task.ID, "sleeping"); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetTaskStatus(sleeping) = %v; want ErrInvalid", err)
	}
	if err := db.Tasks.SetStatus(ctx, "task-none", TaskActive); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetTaskStatus(unknown) = %v; want ErrNotFound", err)
	}
	if err := db.Tasks.Pause(ctx, "task-none", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("PauseTask(unknown) = %v; want ErrNotFound", err)
	}
	task.ID = "task-none"
	if err := db.Tasks.Update(ctx, task); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateTask(unknown) = %v; want ErrNotFound", err)
	}

	other, err := db.Tasks.Create(ctx, Task{Folder: "family", Chat: "1@g.us", Prompt: "p", Kind: TaskOnce, Value: "v"})
	if err != nil {
		t.Fatal(err)
	}
	for folder, want := range map[Folder]int{"": 2, "main": 1, "family": 1, "nobody": 0} {
		ts, err := db.Tasks.List(ctx, folder)
		if err != nil || len(ts) != want {
			t.Errorf("ListTasks(%q) = %d tasks, %v; want %d", folder, len(ts), err, want)
		}
	}
	_ = other
}

// A once task claimed before a crash is closed with an error, never re-run.
func TestFailInterrupted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	db := openAt(t, path)
	task := newTask(t, db, TaskOnce, ptr(t0))
	if claimed, _ := db.Tasks.ClaimDue(ctx, t0, func(Task) Claim { return Claim{} }); len(claimed) != 1 {
		t.Fatalf("claimed %d; want 1", len(claimed))
	}
	db.Close() // the daemon dies mid-run

	db = openAt(t, path)
	closed, err := db.Tasks.FailInterrupted(ctx, nil)
	if err != nil || len(closed) != 1 {
		t.Fatalf("FailInterrupted = %v, %v; want 1 task", closed, err)
	}
	got, _ := db.Tasks.Get(ctx, task.ID)
	if got.Status != TaskDone || got.LastResult != "error: interrupted: bridged stopped during the run" {
		t.Errorf("interrupted task %+v; want done with the interruption as last result", got)
	}
	runs, _ := db.Tasks.Runs(ctx, task.ID, 0)
	if len(runs) != 1 || runs[0].Status != RunError {
		t.Errorf("runs %+v; want one error run", runs)
	}
	if claimed, _ := db.Tasks.ClaimDue(ctx, t0.Add(time.Hour), func(Task) Claim { return Claim{} }); len(claimed) != 0 {
		t.Errorf("ClaimDue after restart claimed %d; want 0", len(claimed))
	}
	if closed, _ := db.Tasks.FailInterrupted(ctx, nil); len(closed) != 0 {
		t.Errorf("second FailInterrupted closed %v; want none", closed)
	}
}

func TestStats(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "local:main", "main")
	if err := db.Chats.Upsert(ctx, Chat{ID: "2@g.us"}); err != nil {
		t.Fatal(err)
	}
	a, _ := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "local:main", Text: "x", Origin: OriginReply})
	_, _ = db.Outbox.Enqueue(ctx, OutboxItem{Chat: "local:main", Text: "y", Origin: OriginReply})
	if err := db.Outbox.MarkFailed(ctx, a.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	newTask(t, db, TaskCron, nil)
	p := newTask(t, db, TaskCron, nil)
	if err := db.Tasks.Pause(ctx, p.ID, ""); err != nil {
		t.Fatal(err)
	}
	got, err := db.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Chats: 2, Groups: 1, PendingOutbox: 1, FailedOutbox: 1, ActiveTasks: 1, PausedTasks: 1}
	if got != want {
		t.Errorf("Stats = %+v; want %+v", got, want)
	}
}

// A recurring task's claim shows in its run log at once, as a running row that
// the end of the run completes; a claim while that run is in flight adds no
// second row.
func TestRecurringRunClaimedVisibly(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	every := newTask(t, db, TaskInterval, ptr(t0))
	hourly := func(task Task) Claim { return Claim{Next: ptr(task.NextRun.Add(time.Hour))} }
	if claimed, err := db.Tasks.ClaimDue(ctx, t0, hourly); err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimDue = %v, %v; want the interval task", claimed, err)
	}
	runs, _ := db.Tasks.Runs(ctx, every.ID, 0)
	if len(runs) != 1 || runs[0].Status != RunRunning || !runs[0].StartedAt.Equal(t0) {
		t.Fatalf("runs after the claim %+v; want one running row started %s", runs, t0)
	}
	// The next slot comes while the run is still going.
	if claimed, err := db.Tasks.ClaimDue(ctx, t0.Add(time.Hour), hourly); err != nil || len(claimed) != 1 {
		t.Fatalf("second ClaimDue = %v, %v; want the interval task", claimed, err)
	}
	if n := count(t, db, "task_runs", "task_id = ?", every.ID); n != 1 {
		t.Errorf("%d run rows after a claim during the run; want 1", n)
	}
	if err := db.Tasks.FinishRun(ctx, TaskRun{TaskID: every.ID, StartedAt: t0.Add(time.Second), Duration: time.Minute, Status: RunOK, Result: "done it"}); err != nil {
		t.Fatal(err)
	}
	runs, _ = db.Tasks.Runs(ctx, every.ID, 0)
	want := TaskRun{ID: runs[0].ID, TaskID: every.ID, StartedAt: t0.Add(time.Second), Duration: time.Minute, Status: RunOK, Result: "done it"}
	if len(runs) != 1 || runs[0] != want {
		t.Errorf("runs after the run %+v; want [%+v]", runs, want)
	}
	// A run with no claim row (the second claim's, merged) gets its own row.
	if err := db.Tasks.FinishRun(ctx, TaskRun{TaskID: every.ID, StartedAt: t0.Add(time.Hour), Status: RunOK, Result: "again"}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "task_runs", "task_id = ?", every.ID); n != 2 {
		t.Errorf("%d run rows; want 2", n)
	}
	if got, _ := db.Tasks.Get(ctx, every.ID); got.Status != TaskActive {
		t.Errorf("interval task %+v; want still active", got)
	}
}

// A paused claim runs nothing and leaves no run row.
func TestClaimDuePauses(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	task := newTask(t, db, TaskCron, ptr(t0))
	claimed, err := db.Tasks.ClaimDue(ctx, t0, func(Task) Claim { return Claim{Pause: "group main was removed; task paused"} })
	if err != nil || len(claimed) != 0 {
		t.Fatalf("ClaimDue = %v, %v; want nothing to run", claimed, err)
	}
	got, _ := db.Tasks.Get(ctx, task.ID)
	if got.Status != TaskPaused || got.LastResult != "group main was removed; task paused" || !got.NextRun.Equal(t0) {
		t.Errorf("task %+v; want paused with the reason, next run unchanged", got)
	}
	if n := count(t, db, "task_runs", ""); n != 0 {
		t.Errorf("%d run rows; want 0", n)
	}
}

// kill -9 during a cron task's run: at the next start the run is an
// "interrupted" error run, and the chat gets one notice, like a once task's.
func TestFailInterruptedRecurring(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	db := openAt(t, path)
	cron := newTask(t, db, TaskCron, ptr(t0))
	once := newTask(t, db, TaskOnce, ptr(t0))
	failing := newTask(t, db, TaskInterval, ptr(t0))
	if err := db.Tasks.FinishRun(ctx, TaskRun{TaskID: failing.ID, StartedAt: t0.Add(-time.Hour), Status: RunError, Error: "crashed"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := db.Tasks.ClaimDue(ctx, t0, func(task Task) Claim {
		if task.Kind == TaskOnce {
			return Claim{}
		}
		return Claim{Next: ptr(t0.Add(time.Hour))}
	})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("ClaimDue = %v, %v; want 3 tasks", claimed, err)
	}
	db.Close() // the daemon dies mid-run

	db = openAt(t, path)
	db.now = func() time.Time { return t0.Add(time.Minute) }
	var asked []TaskID
	notice := func(task Task) string {
		asked = append(asked, task.ID)
		if task.LastResult != "" {
			return "" // its last run failed already: said so then
		}
		return "Scheduled task " + string(task.ID) + " failed: interrupted"
	}
	closed, err := db.Tasks.FailInterrupted(ctx, notice)
	if err != nil || len(closed) != 3 {
		t.Fatalf("FailInterrupted = %v, %v; want 3 tasks", closed, err)
	}
	if len(asked) != 3 {
		t.Errorf("notice asked about %v; want the 3 tasks", asked)
	}
	for _, task := range []Task{cron, once, failing} {
		runs, _ := db.Tasks.Runs(ctx, task.ID, 1)
		if len(runs) != 1 || runs[0].Status != RunError || runs[0].Error != "interrupted: bridged stopped during the run" || !runs[0].StartedAt.Equal(t0) {
			t.Errorf("%s %s: latest run %+v; want an interrupted error run started at the claim, %s", task.Kind, task.ID, runs, t0)
		}
		got, _ := db.Tasks.Get(ctx, task.ID)
		if got.LastResult != "error: interrupted: bridged stopped during the run" || got.LastRun == nil || !got.LastRun.Equal(t0) {
			t.Errorf("%s task %+v; want the interruption as last result", task.Kind, got)
		}
	}
	if got, _ := db.Tasks.Get(ctx, cron.ID); got.Status != TaskActive || !got.NextRun.Equal(t0.Add(time.Hour)) {
		t.Errorf("cron task %+v; want active with its next run", got)
	}
	if got, _ := db.Tasks.Get(ctx, once.ID); got.Status != TaskDone {
		t.Errorf("once task %+v; want done", got)
	}
	notices, _ := db.Outbox.Pending(ctx, 0)
	if len(notices) != 2 {
		t.Fatalf("outbox %+v; want one notice for the cron task and one for the once task", notices)
	}
	for _, n := range notices {
		if n.Origin != OriginNotice || n.Chat != "local:main" || n.Group != "main" {
			t.Errorf("notice %+v; want a notice to local:main from main", n)
		}
	}
	if n := count(t, db, "task_runs", "status = 'running'"); n != 0 {
		t.Errorf("%d running rows left", n)
	}
	// A second start finds nothing: no second notice.
	if again, _ := db.Tasks.FailInterrupted(ctx, notice); len(again) != 0 {
		t.Errorf("second FailInterrupted closed %v; want none", again)
	}
	if n := count(t, db, "outbox", ""); n != 2 {
		t.Errorf("%d outbox rows after a second start; want 2", n)
	}
}
