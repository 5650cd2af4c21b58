package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/ipchost/ipchosttest"
	"github.com/bridged-app/bridged/internal/scheduler"
	"github.com/bridged-app/bridged/internal/store"
)

// leftoverRuntime has the containers a killed daemon left. Like a real
// leftover, the dead daemon's container goes on with its turn until it is
// stopped: it writes its send_message request as it is being stopped.
type leftoverRuntime struct {
	t        *testing.T
	managed  []container.Info
	requests string // where the leftover writes its request
	req      ipc.Request

	mu      sync.Mutex
	stopped []string
}

func (r *leftoverRuntime) Start(context.Context, container.Spec) (container.Run, error) {
	r.t.Error("a container was started during start-up recovery")
	return nil, os.ErrInvalid
}

func (r *leftoverRuntime) Stop(_ context.Context, id string, _ time.Duration) error {
	if id == "dead-1" {
		if err := ipc.WriteJSON(r.requests, r.req.FileName(), r.req); err != nil {
			r.t.Error(err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = append(r.stopped, id)
	return nil
}

func (r *leftoverRuntime) ListManaged(context.Context) ([]container.Info, error) {
	return r.managed, nil
}

type noQueue struct{}

func (noQueue) EnqueueTask(store.Task) {}

// kill -9 mid-turn, then a start: the dead daemon's container is stopped
// before the IPC host looks at the requests, so the request it wrote while
// finishing its turn is quarantined, not carried out (its turn runs again);
// the task run it was doing is closed with one notice; containers of other
// homes and of this instance are left alone.
func TestRecoverStartOrder(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	db := openDB(t, home)
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:family", Name: "family", Folder: "family", Trigger: "@Andy"}); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(-time.Minute)
	task, err := db.Tasks.Create(ctx, store.Task{Folder: "family", Chat: "local:family", Prompt: "p", Kind: store.TaskInterval, Value: "1h", NextRun: &due})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Tasks.ClaimDue(ctx, time.Now(), func(store.Task) store.Claim { return store.Claim{Next: ptrTime(time.Now().Add(time.Hour))} }); err != nil {
		t.Fatal(err)
	}

	log := zerolog.New(zerolog.NewTestWriter(t))
	host, err := ipchost.New(ipchost.Config{Home: home, Sweep: time.Hour}, db, ipchosttest.Outbox{DB: db}, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	sched := scheduler.New(db, noQueue{}, time.UTC, log, nil)
	ipcDir := filepath.Join(home, "data", "ipc", "family")
	label := container.HomeLabel(home)
	rt := &leftoverRuntime{
		t: t,
		managed: []container.Info{
			{ID: "dead-1", Name: "bridged-family-dead", Group: "family", Instance: "dead", Home: label},
			{ID: "mine-1", Name: "bridged-family-new", Group: "family", Instance: "new", Home: label},
			{ID: "other-1", Name: "bridged-family-other", Group: "family", Instance: "x", Home: container.HomeLabel("/elsewhere")},
		},
		requests: ipc.Layout{Root: ipcDir}.Requests(),
		req:      ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"}),
	}

	if err := recoverStart(ctx, rt, home, "new", host, sched, log); err != nil {
		t.Fatalf("recoverStart: %v", err)
	}
	if !slices.Equal(rt.stopped, []string{"dead-1"}) {
		t.Errorf("stopped %v; want only the dead daemon's container of this home", rt.stopped)
	}
	if _, err := os.Lstat(filepath.Join(ipcDir, ipchost.ErrorsDir, rt.req.FileName())); err != nil {
		t.Errorf("the leftover's request is not in errors/: %v", err)
	}

	// The host now runs: a request of this daemon's containers is carried
	// out, the leftover's is not.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- host.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("host.Run: %v", err)
		}
	}()
	fresh := ipc.NewRequest(ipc.SendMessageArgs{Text: "fresh"})
	if err := ipc.WriteJSON(rt.requests, fresh.FileName(), fresh); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(ipc.Layout{Root: ipcDir}.Responses(), fresh.ID+".json"))

	out, err := db.Outbox.Pending(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, it := range out {
		texts = append(texts, it.Text)
	}
	if len(out) != 2 || out[0].Origin != store.OriginNotice || !strings.Contains(out[0].Text, string(task.ID)) || out[1].Text != "fresh" {
		t.Errorf("outbox %q; want the interrupted task's notice, then only the fresh message", texts)
	}
	runs, _ := db.Tasks.Runs(ctx, task.ID, 0)
	if len(runs) != 1 || runs[0].Status != store.RunError || !strings.Contains(runs[0].Error, "interrupted") {
		t.Errorf("task runs %+v; want one interrupted run", runs)
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// waitFile waits until path exists, up to 10 s.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Lstat(path); err == nil {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s did not appear within 10s", path)
		}
	}
}
