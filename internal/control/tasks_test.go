package control

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

func createTask(t *testing.T, db *store.DB, folder store.Folder, kind store.TaskKind, value string, next time.Time) store.Task {
	t.Helper()
	tk, err := db.Tasks.Create(context.Background(), store.Task{Folder: folder, Chat: "local:main", Prompt: "water the plants",
		Kind: kind, Value: value, NextRun: &next})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	return tk
}

func TestTasksThroughAPI(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	tk := createTask(t, h.db, "main", store.TaskInterval, "1h", time.Now().Add(time.Hour))

	ts, err := h.client.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].ID != string(tk.ID) || ts[0].Status != "active" {
		t.Fatalf("got %+v; want the one active task", ts)
	}
	p, err := h.client.PauseTask(ctx, string(tk.ID))
	if err != nil || p.Status != "paused" {
		t.Fatalf("PauseTask got %+v, %v; want paused", p, err)
	}
	r, err := h.client.ResumeTask(ctx, string(tk.ID))
	if err != nil || r.Status != "active" {
		t.Fatalf("ResumeTask got %+v, %v; want active", r, err)
	}
	if got := h.wake.n.Load(); got != 2 {
		t.Errorf("got %d scheduler wakes; want 2", got)
	}
	if err := h.db.Tasks.FinishRun(ctx, store.TaskRun{TaskID: tk.ID, StartedAt: time.Now(), Duration: 3 * time.Second, Status: store.RunError, Error: "container crashed"}); err != nil {
		t.Fatal(err)
	}
	runs, err := h.client.TaskRuns(ctx, string(tk.ID), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Error != "container crashed" || runs[0].Duration != "3s" {
		t.Errorf("got runs %+v; want the one failed run of 3s", runs)
	}
	if err := h.client.CancelTask(ctx, string(tk.ID)); err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	// Its run history stays.
	if runs, err := h.client.TaskRuns(ctx, string(tk.ID), 10); err != nil || len(runs) != 1 || runs[0].Error != "container crashed" {
		t.Errorf("runs of the cancelled task: %+v, %v; want its one failed run still listed", runs, err)
	}
	for _, call := range []func() error{
		func() error { _, err := h.client.PauseTask(ctx, string(tk.ID)); return err },
		func() error { return h.client.CancelTask(ctx, string(tk.ID)) },
		func() error { _, err := h.client.TaskRuns(ctx, "task-000000000000", 0); return err }, // never was
	} {
		if err := call(); !errors.Is(err, ErrNotFound) {
			t.Errorf("call on a cancelled task got %v; want ErrNotFound", err)
		}
	}
	if err := h.client.do(ctx, "POST", "/v1/tasks/"+string(tk.ID)+"/explode", nil, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown action got %v; want ErrNotFound", err)
	}
}

func TestResumeSkipsMissedSlots(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	a := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC, Now: func() time.Time { return now }}
	tests := []struct {
		name  string
		kind  store.TaskKind
		value string
		next  time.Time
		want  time.Time
	}{
		{"cron missed a week", store.TaskCron, "0 9 * * *", now.Add(-7 * 24 * time.Hour).Add(-30 * time.Minute), time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)},
		{"interval keeps its anchor", store.TaskInterval, "1h", now.Add(-150 * time.Minute), now.Add(30 * time.Minute)},
		{"future slot kept", store.TaskInterval, "1h", now.Add(10 * time.Minute), now.Add(10 * time.Minute)},
		{"overdue once runs now", store.TaskOnce, "2026-11-20T10:00:00Z", time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := createTask(t, db, "main", tt.kind, tt.value, tt.next)
			if _, err := a.PauseTask(ctx, string(tk.ID)); err != nil {
				t.Fatal(err)
			}
			got, err := a.ResumeTask(ctx, string(tk.ID))
			if err != nil {
				t.Fatalf("ResumeTask: %v", err)
			}
			if got.NextRun == nil || !got.NextRun.Equal(tt.want) {
				t.Errorf("got next run %v; want %v", got.NextRun, tt.want)
			}
			stored, _ := db.Tasks.Get(ctx, tk.ID)
			if stored.Status != store.TaskActive {
				t.Errorf("got stored status %s; want active", stored.Status)
			}
		})
	}
	orphan := createTask(t, db, "gone", store.TaskInterval, "1h", now)
	if _, err := a.PauseTask(ctx, string(orphan.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ResumeTask(ctx, string(orphan.ID)); !errors.Is(err, ErrInvalid) {
		t.Errorf("resume of a task whose group is gone got %v; want ErrInvalid", err)
	}
}

// TestSlug moved to internal/rules with Slug.

func TestStatusAndMetrics(t *testing.T) {
	live := Live{
		Containers: []ContainerStatus{{Group: "main", Kind: "messages", Since: time.Now()}},
		Queue:      QueueStatus{Active: 1, Waiting: 2},
		Failures:   []Failure{{Time: time.Now(), Kind: "run", Where: "family", Error: "gave up after 5 retries"}},
	}
	h := start(t, live)
	h.addMain(t)
	ctx := context.Background()
	if _, err := h.client.PostMessage(ctx, "local:main", "alice", "hello"); err != nil {
		t.Fatal(err)
	}
	it, err := h.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: "local:main", Group: "main", Text: "lost", Origin: store.OriginReply})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.db.Outbox.MarkFailed(ctx, it.ID, "chat vanished"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: "local:main", Group: "main", Text: "waiting", Origin: store.OriginReply}); err != nil {
		t.Fatal(err)
	}
	if err := h.db.Usage.AddAPI(ctx, store.APIUsage{Folder: "main", CostUSD: 0.25}); err != nil {
		t.Fatal(err)
	}

	st, err := h.client.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if !st.Running || st.Daemon == nil || st.Daemon.Version != "test" {
		t.Errorf("got running %v daemon %+v; want running, version test", st.Running, st.Daemon)
	}
	if st.Outbox.Pending != 1 || st.Outbox.Failed != 1 || st.Queue.Waiting != 2 || len(st.Containers) != 1 || st.CostToday != 0.25 {
		t.Errorf("got %+v; want 1 pending, 1 failed, 2 waiting, 1 container, $0.25", st)
	}
	kinds := map[string]bool{}
	for _, f := range st.Failures {
		kinds[f.Kind+":"+f.Error] = true
	}
	if !kinds["outbox:chat vanished"] || !kinds["run:gave up after 5 retries"] {
		t.Errorf("got failures %+v; want the failed outbox row and the failed run", st.Failures)
	}
	if len(st.Channels) != 2 || st.Channels[1].State != "not-paired" {
		t.Errorf("got channels %+v; want local and whatsapp not-paired", st.Channels)
	}

	text, err := h.client.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	for _, want := range []string{
		"bridged_up 1\n",
		"bridged_messages_stored_total 1\n",
		"bridged_outbox_pending 1\n",
		"bridged_outbox_failed_total 1\n",
		"bridged_containers_running 1\n",
		"bridged_queue_waiting 2\n",
		`bridged_channel_connected{channel="local"} 1` + "\n",
		`bridged_channel_connected{channel="whatsapp"} 0` + "\n",
		"bridged_fake_state 5\n",
		"bridged_cost_usd_today 0.25\n",
		"# TYPE bridged_messages_stored_total counter\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q; got:\n%s", want, text)
		}
	}
}

func TestStoreOnlyStatus(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	tz, _ := time.LoadLocation("Europe/Berlin")
	// 00:30 in Berlin: a turn at 23:50 the day before is not "today".
	now := time.Date(2026, 11, 22, 23, 30, 0, 0, time.UTC)
	a := &Admin{DB: db, Timezone: tz, Now: func() time.Time { return now }}
	if err := db.Usage.AddAPI(ctx, store.APIUsage{Folder: "main", CostUSD: 1, At: now.Add(-40 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Usage.AddAPI(ctx, store.APIUsage{Folder: "main", CostUSD: 0.5, At: now.Add(-10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	st, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running || st.CostToday != 0.5 || st.Timezone != "Europe/Berlin" {
		t.Errorf("got running %v cost %v tz %s; want not running, 0.5, Europe/Berlin", st.Running, st.CostToday, st.Timezone)
	}
}
