package ipchost

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// withLimits replaces e's host with one holding the given task limits.
func (e *env) withLimits(t *testing.T, maxTasks, maxPrompt int) {
	t.Helper()
	h, err := New(Config{Home: e.home, Timezone: e.loc, AssistantName: "Andy", Sweep: e.h.cfg.Sweep, MaxTasks: maxTasks, MaxTaskPrompt: maxPrompt},
		e.db, e.msg, e.waker, e.refresh, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.now = e.h.now
	e.h = h
}

func scheduleReq(prompt, target string) ipc.Request {
	return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: prompt, ScheduleType: "cron", ScheduleValue: "0 9 * * *", TargetGroup: target})
}

// Requests racing for the last places never store more than the cap; paused
// tasks count, done ones do not.
func TestTaskCapHolds(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t) // family has one task already
	e.withLimits(t, 4, 0)

	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := e.h.Handle(ctx, "family", scheduleReq(fmt.Sprintf("task %d", i), ""))
			if !resp.OK {
				if !strings.Contains(resp.Error, "already has 4 scheduled tasks") || !strings.Contains(resp.Error, "cancel_task") {
					t.Errorf("refusal %q does not name the cap and cancel_task", resp.Error)
				}
				mu.Lock()
				refused++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ts, err := e.db.Tasks.List(ctx, "family")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 4 || refused != 7 {
		t.Fatalf("%d tasks stored, %d refused; want 4 (the cap) and 7", len(ts), refused)
	}

	// A paused task still counts; a done one does not.
	if err := e.db.Tasks.Pause(ctx, ts[0].ID, ""); err != nil {
		t.Fatal(err)
	}
	if resp := e.h.Handle(ctx, "family", scheduleReq("one more", "")); resp.OK {
		t.Fatal("a task past the cap was accepted after one was paused")
	}
	if err := e.db.Tasks.SetStatus(ctx, ts[1].ID, store.TaskDone); err != nil {
		t.Fatal(err)
	}
	if resp := e.h.Handle(ctx, "family", scheduleReq("in the done task's place", "")); !resp.OK {
		t.Fatalf("after a task was done: %s; want room for one", resp.Error)
	}
	// Main, scheduling for family, is held to family's cap, not its own.
	if resp := e.h.Handle(ctx, "main", scheduleReq("from main", "family")); resp.OK || !strings.Contains(resp.Error, "group family already has 4") {
		t.Fatalf("main scheduling for the full group: ok=%v %q; want family's cap", resp.OK, resp.Error)
	}
	if resp := e.h.Handle(ctx, "main", scheduleReq("main's own", "")); !resp.OK {
		t.Fatalf("main's own task: %s; want it scheduled (main has room)", resp.Error)
	}
}

// A prompt over the cap is refused by schedule_task and update_task alike,
// and nothing changes.
func TestTaskPromptCap(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.withLimits(t, 0, 1024)
	before := e.snapshot(t)
	big := strings.Repeat("x", 1025)
	resp := e.h.Handle(ctx, "family", scheduleReq(big, ""))
	if resp.OK || !strings.Contains(resp.Error, "1025 bytes, over the 1024-byte limit") || !strings.Contains(resp.Error, "nothing was scheduled") {
		t.Fatalf("schedule_task with a 1025-byte prompt: ok=%v %q; want the size refusal", resp.OK, resp.Error)
	}
	id := string(e.tasks["family"].ID)
	resp = e.h.Handle(ctx, "family", ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: id, Prompt: &big}))
	if resp.OK || !strings.Contains(resp.Error, "over the 1024-byte limit") || !strings.Contains(resp.Error, "nothing was changed") {
		t.Fatalf("update_task with a 1025-byte prompt: ok=%v %q; want the size refusal", resp.OK, resp.Error)
	}
	if after := e.snapshot(t); after != before {
		t.Error("a refused prompt changed the store")
	}
	fits := strings.Repeat("x", 1024)
	if resp := e.h.Handle(ctx, "family", scheduleReq(fits, "")); !resp.OK {
		t.Fatalf("a prompt of exactly the limit: %s; want it scheduled", resp.Error)
	}
}
