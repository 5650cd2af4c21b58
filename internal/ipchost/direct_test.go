package ipchost

import (
	"context"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// A main group whose profile is not full cannot make another group's agent
// run anything: scheduling there, changing a task there and resuming one
// there are refused, saying why, and change nothing. Pausing and cancelling
// (which run nothing) and its own tasks stay allowed. Every task records
// who set its prompt.
func TestMainNotFullCannotDirectAnotherGroup(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g, err := e.db.Groups.ByFolder(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	g.Tools = store.ToolsReadOnly
	if err := e.db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	fam := e.tasks["family"].ID
	if err := e.db.Tasks.Pause(ctx, fam, ""); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(t)
	for name, req := range map[string]ipc.Request{
		"schedule": ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *", TargetGroup: "family"}),
		"update":   ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(fam), Prompt: ptr("touch x")}),
		"schedule of a task": ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(fam), ScheduleType: ptr(schedule.Interval),
			ScheduleValue: ptr("2h")}),
		"resume": mustRequest(t, ipc.TypeResumeTask, fam),
	} {
		resp := e.h.Handle(ctx, "main", req)
		if resp.OK || !strings.Contains(resp.Error, "refused: group main may not") || !strings.Contains(resp.Error, "tool profile is read-only") {
			t.Errorf("%s: got ok=%v error %q; want refused for main's read-only profile", name, resp.OK, resp.Error)
		}
	}
	if after := e.snapshot(t); after != before {
		t.Errorf("refused requests changed the store:\n%s\nwant\n%s", after, before)
	}

	// Its own tasks: set by main.
	resp := e.h.Handle(ctx, "main", ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *"}))
	if !resp.OK {
		t.Fatalf("main's own task: %s", resp.Error)
	}
	if task, _ := e.task(t, store.TaskID(decodeData[ipc.TaskInfo](t, resp).ID)); task.PromptBy != "main" {
		t.Errorf("main's own task set by %q; want main", task.PromptBy)
	}
	if resp := e.h.Handle(ctx, "main", mustRequest(t, ipc.TypeCancelTask, e.tasks["work"].ID)); !resp.OK {
		t.Errorf("read-only main cancelling another group's task: %s; want it allowed", resp.Error)
	}

	// Full again: allowed, and the task records main as its prompt's setter.
	g.Tools = store.ToolsFull
	if err := e.db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	resp = e.h.Handle(ctx, "main", ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(fam), Prompt: ptr("new prompt")}))
	if !resp.OK {
		t.Fatalf("full main changing family's task: %s", resp.Error)
	}
	if task, _ := e.task(t, fam); task.PromptBy != "main" || task.Prompt != "new prompt" {
		t.Errorf("family's task is %q set by %q; want main's new prompt", task.Prompt, task.PromptBy)
	}
}
