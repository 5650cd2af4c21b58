package rules

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// now is 09:30 in Berlin.
var now = time.Date(2026, 11, 22, 8, 30, 0, 0, time.UTC)

func berlin(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func at(loc *time.Location, s string) *time.Time {
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		panic(err)
	}
	return &v
}

func TestFirstRun(t *testing.T) {
	loc := berlin(t)
	tests := []struct {
		kind    schedule.Kind
		value   string
		want    *time.Time
		wantErr string
	}{
		{schedule.Cron, "0 9 * * 1-5", at(loc, "2026-11-23 09:00"), ""},
		{schedule.Interval, "1h30m", at(loc, "2026-11-22 11:00"), ""},
		{schedule.Once, "2026-11-24 18:00", at(loc, "2026-11-24 18:00"), ""},
		{schedule.Once, "2026-11-22 09:29", at(loc, "2026-11-22 09:29"), ""}, // within the slack
		{schedule.Once, "2026-11-21 09:00", nil, `invalid time "2026-11-21 09:00": it is in the past`},
		{schedule.Cron, "0 25 * * *", nil, "invalid cron expression"},
		{schedule.Interval, "10s", nil, "invalid interval"},
		{"weekly", "x", nil, "schedule_type must be cron, interval or once"},
	}
	for _, tt := range tests {
		_, got, err := FirstRun(tt.kind, tt.value, now, loc)
		if tt.wantErr != "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("FirstRun(%s %q) = %v, %v; want an ErrInvalid containing %q", tt.kind, tt.value, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(*tt.want) {
			t.Errorf("FirstRun(%s %q) = %v, %v; want %v", tt.kind, tt.value, got, err, tt.want)
		}
	}
}

func TestPause(t *testing.T) {
	tests := []struct {
		status      store.TaskStatus
		want        store.TaskStatus
		wantChanged bool
		wantErr     string
	}{
		{store.TaskActive, store.TaskPaused, true, ""},
		{store.TaskPaused, store.TaskPaused, false, ""},
		{store.TaskRunning, "", false, "is running now and has no later run to pause"},
		{store.TaskDone, "", false, "is done"},
	}
	for _, tt := range tests {
		got, changed, err := Pause(store.Task{ID: "task-1", Status: tt.status})
		if tt.wantErr != "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Pause(%s) = %v; want an ErrInvalid containing %q", tt.status, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Status != tt.want || changed != tt.wantChanged {
			t.Errorf("Pause(%s) = %s, changed %v, %v; want %s, changed %v", tt.status, got.Status, changed, err, tt.want, tt.wantChanged)
		}
	}
}

func TestResume(t *testing.T) {
	loc := berlin(t)
	tests := []struct {
		name     string
		task     store.Task
		wantNext *time.Time // nil: none
		wantErr  string
	}{
		{name: "cron that missed a week continues with its next slot from now",
			task:     store.Task{Kind: store.TaskCron, Value: "0 9 * * *", Status: store.TaskPaused, NextRun: at(loc, "2026-11-15 09:00")},
			wantNext: at(loc, "2026-11-23 09:00")},
		{name: "cron still to come keeps its slot",
			task:     store.Task{Kind: store.TaskCron, Value: "0 9 * * *", Status: store.TaskPaused, NextRun: at(loc, "2026-11-23 09:00")},
			wantNext: at(loc, "2026-11-23 09:00")},
		{name: "cron without a next run gets its first slot from now",
			task:     store.Task{Kind: store.TaskCron, Value: "0 9 * * *", Status: store.TaskPaused},
			wantNext: at(loc, "2026-11-23 09:00")},
		{name: "interval keeps its anchor",
			task:     store.Task{Kind: store.TaskInterval, Value: "1h", Status: store.TaskPaused, NextRun: at(loc, "2026-11-22 07:00")},
			wantNext: at(loc, "2026-11-22 10:00")},
		{name: "overdue once runs now",
			task:     store.Task{Kind: store.TaskOnce, Value: "2026-11-20 10:00", Status: store.TaskPaused, NextRun: at(loc, "2026-11-20 10:00")},
			wantNext: at(loc, "2026-11-20 10:00")},
		{name: "once with no run left cannot be resumed",
			task:    store.Task{Kind: store.TaskOnce, Value: "2026-11-20 10:00", Status: store.TaskPaused},
			wantErr: "has no run left"},
		{name: "an active task stays as it is",
			task:     store.Task{Kind: store.TaskInterval, Value: "1h", Status: store.TaskActive, NextRun: at(loc, "2026-11-22 07:00")},
			wantNext: at(loc, "2026-11-22 07:00")},
		{name: "a running task is not paused",
			task:    store.Task{Kind: store.TaskOnce, Value: "2026-11-20 10:00", Status: store.TaskRunning},
			wantErr: "is running now; it is not paused"},
		{name: "a done task needs a new schedule",
			task:    store.Task{Kind: store.TaskOnce, Value: "2026-11-20 10:00", Status: store.TaskDone},
			wantErr: "is done; give it a new schedule"},
		{name: "a schedule that no longer parses",
			task:    store.Task{Kind: store.TaskCron, Value: "every day", Status: store.TaskPaused, NextRun: at(loc, "2026-11-20 10:00")},
			wantErr: "cannot be resumed: invalid schedule: invalid cron expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.task.ID = "task-1"
			got, _, err := Resume(tt.task, now, loc)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want an ErrInvalid containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != store.TaskActive || got.NextRun == nil || !got.NextRun.Equal(*tt.wantNext) {
				t.Errorf("got %s next %v; want active next %v", got.Status, got.NextRun, tt.wantNext)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	loc := berlin(t)
	cron, once := schedule.Cron, schedule.Once
	base := store.Task{ID: "task-1", Prompt: "p", Kind: store.TaskInterval, Value: "1h", Status: store.TaskActive, NextRun: at(loc, "2026-11-22 10:00")}
	with := func(s store.TaskStatus) store.Task { t := base; t.Status = s; return t }
	tests := []struct {
		name    string
		task    store.Task
		c       TaskChange
		check   func(store.Task) bool
		wantErr string
	}{
		{"new prompt", base, TaskChange{Prompt: ptr("q")}, func(t store.Task) bool { return t.Prompt == "q" && t.NextRun.Equal(*base.NextRun) }, ""},
		{"new schedule from now", base, TaskChange{Kind: &cron, Value: ptr("0 9 * * *")},
			func(t store.Task) bool {
				return t.Kind == store.TaskCron && t.NextRun.Equal(*at(loc, "2026-11-23 09:00"))
			}, ""},
		{"a done task runs again", with(store.TaskDone), TaskChange{Kind: &once, Value: ptr("2026-11-23 08:00")},
			func(t store.Task) bool {
				return t.Status == store.TaskActive && t.NextRun.Equal(*at(loc, "2026-11-23 08:00"))
			}, ""},
		{"a paused task stays paused", with(store.TaskPaused), TaskChange{Kind: &cron, Value: ptr("0 9 * * *")},
			func(t store.Task) bool { return t.Status == store.TaskPaused }, ""},
		{"a running task's prompt", with(store.TaskRunning), TaskChange{Prompt: ptr("q")}, func(t store.Task) bool { return t.Prompt == "q" }, ""},

		{"a running task's schedule", with(store.TaskRunning), TaskChange{Kind: &cron, Value: ptr("0 9 * * *")}, nil, "is running now"},
		{"invalid schedule", base, TaskChange{Prompt: ptr("q"), Kind: &cron, Value: ptr("every day")}, nil, "invalid cron expression"},
		{"once in the past", base, TaskChange{Kind: &once, Value: ptr("2026-11-21 09:00")}, nil, "in the past"},
		{"kind without value", base, TaskChange{Kind: &cron}, nil, "changed together"},
		{"blank prompt", base, TaskChange{Prompt: ptr("  ")}, nil, "prompt must not be empty"},
		{"nothing", base, TaskChange{}, nil, "nothing to change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Update(tt.task, tt.c, now, loc)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want an ErrInvalid containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(got) {
				t.Errorf("got %+v, %v", got, err)
			}
		})
	}
}

// The Tx variants store what the pure functions decide, and nothing when
// they refuse.
func TestTaskTx(t *testing.T) {
	ctx := context.Background()
	loc := berlin(t)
	db := storetest.Open(t)
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	mk := func(folder store.Folder, next *time.Time) store.Task {
		tk, err := db.Tasks.Create(ctx, store.Task{Folder: folder, Chat: "local:main", Prompt: "p", Kind: store.TaskCron, Value: "0 9 * * *", NextRun: next})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	inTx := func(fn func(tx *store.Tx) error) error { return db.Tx(ctx, fn) }

	tk := mk("main", at(loc, "2026-11-15 09:00"))
	if err := inTx(func(tx *store.Tx) error { _, err := PauseTask(ctx, tx, tk); return err }); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Tasks.Get(ctx, tk.ID); got.Status != store.TaskPaused {
		t.Errorf("got stored status %s after PauseTask; want paused", got.Status)
	}
	paused, _ := db.Tasks.Get(ctx, tk.ID)
	if err := inTx(func(tx *store.Tx) error { _, err := ResumeTask(ctx, tx, paused, now, loc); return err }); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Tasks.Get(ctx, tk.ID); got.Status != store.TaskActive || !got.NextRun.Equal(*at(loc, "2026-11-23 09:00")) {
		t.Errorf("got stored %s next %v after ResumeTask; want active next 2026-11-23 09:00", got.Status, got.NextRun)
	}

	orphan := mk("gone", at(loc, "2026-11-23 09:00"))
	if err := db.Tasks.Pause(ctx, orphan.ID, ""); err != nil {
		t.Fatal(err)
	}
	orphan, _ = db.Tasks.Get(ctx, orphan.ID)
	err := inTx(func(tx *store.Tx) error { _, err := ResumeTask(ctx, tx, orphan, now, loc); return err })
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("resume of a task whose group is gone got %v; want ErrInvalid, not registered", err)
	}
	if got, _ := db.Tasks.Get(ctx, orphan.ID); got.Status != store.TaskPaused {
		t.Errorf("got stored status %s after a refused resume; want paused", got.Status)
	}

	cron := schedule.Cron
	err = inTx(func(tx *store.Tx) error {
		_, err := UpdateTask(ctx, tx, tk, TaskChange{Prompt: ptr("changed"), Kind: &cron, Value: ptr("bad")}, now, loc)
		return err
	})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("update with a bad schedule got %v; want ErrInvalid", err)
	}
	if got, _ := db.Tasks.Get(ctx, tk.ID); got.Prompt != "p" {
		t.Errorf("got stored prompt %q after a refused update; want p", got.Prompt)
	}
	if err := inTx(func(tx *store.Tx) error { return CancelTask(ctx, tx, tk) }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Tasks.Get(ctx, tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("got %v after CancelTask; want ErrNotFound", err)
	}
}
