package ipchost

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// TestAuthorization walks every row of DESIGN §8's table, allowed and
// refused. A refusal must answer with the reason and change nothing: no
// outbox row, no task or group touched, no message handed to the messenger.
func TestAuthorization(t *testing.T) {
	tests := []struct {
		name    string
		from    store.Folder
		req     func(t *testing.T, e *env) ipc.Request
		wantErr string // empty: allowed
		check   func(t *testing.T, e *env, resp ipc.Response)
	}{
		// send_message to own chat
		{
			name: "main sends to its own chat", from: "main",
			req: func(*testing.T, *env) ipc.Request { return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"}) },
			check: func(t *testing.T, e *env, resp ipc.Response) {
				wantSent(t, e, resp, "local:main", "main")
			},
		},
		{
			name: "other group sends to its own chat", from: "family",
			req: func(*testing.T, *env) ipc.Request { return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"}) },
			check: func(t *testing.T, e *env, resp ipc.Response) {
				wantSent(t, e, resp, "local:family", "family")
			},
		},
		{
			name: "other group names its own chat as target", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "local:family"})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				wantSent(t, e, resp, "local:family", "family")
			},
		},
		// send_message to another chat
		{
			name: "main sends to another registered chat", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "local:family"})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				wantSent(t, e, resp, "local:family", "main")
			},
		},
		{
			name: "main sends to a known unregistered chat", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: strangerChat})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				wantSent(t, e, resp, strangerChat, "main")
			},
		},
		{
			name: "main sends to an unknown chat", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "4915100000000@s.whatsapp.net"})
			},
			wantErr: `unknown chat "4915100000000@s.whatsapp.net"`,
		},
		{
			name: "other group sends to another group's chat", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "local:work"})
			},
			wantErr: "refused: only the main group can send to another chat",
		},
		{
			name: "other group sends to the main chat", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "local:main"})
			},
			wantErr: "refused: only the main group can send to another chat",
		},
		{
			name: "other group sends to an unregistered chat", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: strangerChat})
			},
			wantErr: "refused: only the main group can send to another chat",
		},
		// schedule own tasks
		{
			name: "main schedules its own task", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *"})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) { wantScheduled(t, e, resp, "main") },
		},
		{
			name: "other group schedules its own task", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *", ContextMode: ipc.ContextGroup})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				info := wantScheduled(t, e, resp, "family")
				if info.ContextMode != ipc.ContextGroup {
					t.Errorf("context mode %s; want group", info.ContextMode)
				}
			},
		},
		{
			name: "other group names itself as target group", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *", TargetGroup: "family"})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) { wantScheduled(t, e, resp, "family") },
		},
		// schedule another group's task
		{
			name: "main schedules a task for another group", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *", TargetGroup: "family"})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) { wantScheduled(t, e, resp, "family") },
		},
		{
			name: "main schedules a task for an unregistered group", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *", TargetGroup: "nobody"})
			},
			wantErr: `group "nobody" is not registered`,
		},
		{
			name: "other group schedules a task for another group", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *", TargetGroup: "work"})
			},
			wantErr: "refused: only the main group can schedule tasks for another group",
		},
		{
			name: "other group schedules a task for main", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Interval, ScheduleValue: "1h", TargetGroup: "main"})
			},
			wantErr: "refused: only the main group can schedule tasks for another group",
		},
		// list
		{
			name: "main lists every task", from: "main",
			req: func(*testing.T, *env) ipc.Request { return ipc.NewRequest(ipc.ListTasksArgs{}) },
			check: func(t *testing.T, e *env, resp ipc.Response) {
				if got := taskGroups(decodeData[[]ipc.TaskInfo](t, resp)); !slices.Equal(got, []string{"family", "main", "work"}) {
					t.Errorf("listed tasks of %v; want main, family and work", got)
				}
			},
		},
		{
			name: "other group lists only its own tasks", from: "family",
			req: func(*testing.T, *env) ipc.Request { return ipc.NewRequest(ipc.ListTasksArgs{}) },
			check: func(t *testing.T, e *env, resp ipc.Response) {
				list := decodeData[[]ipc.TaskInfo](t, resp)
				if got := taskGroups(list); !slices.Equal(got, []string{"family"}) {
					t.Fatalf("listed tasks of %v; want only family", got)
				}
				if want := "2026-11-22T10:30:00+01:00"; list[0].NextRun != want {
					t.Errorf("next run %q; want %q (RFC 3339 in the configured timezone)", list[0].NextRun, want)
				}
			},
		},
		// pause / resume / cancel / update own tasks
		{
			name: "other group pauses its own task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				return mustRequest(t, ipc.TypePauseTask, e.tasks["family"].ID)
			},
			check: func(t *testing.T, e *env, resp ipc.Response) { wantStatus(t, e, "family", store.TaskPaused) },
		},
		{
			name: "other group resumes its own task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				pause(t, e, "family")
				return mustRequest(t, ipc.TypeResumeTask, e.tasks["family"].ID)
			},
			check: func(t *testing.T, e *env, resp ipc.Response) { wantStatus(t, e, "family", store.TaskActive) },
		},
		{
			name: "other group cancels its own task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				return mustRequest(t, ipc.TypeCancelTask, e.tasks["family"].ID)
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				if _, ok := e.task(t, e.tasks["family"].ID); ok {
					t.Error("task still exists; want it deleted")
				}
			},
		},
		{
			name: "other group updates its own task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				return ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(e.tasks["family"].ID), Prompt: ptr("new prompt")})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				if got, _ := e.task(t, e.tasks["family"].ID); got.Prompt != "new prompt" {
					t.Errorf("prompt %q; want %q", got.Prompt, "new prompt")
				}
			},
		},
		// the same for another group's tasks
		{
			name: "main pauses another group's task", from: "main",
			req: func(t *testing.T, e *env) ipc.Request {
				return mustRequest(t, ipc.TypePauseTask, e.tasks["work"].ID)
			},
			check: func(t *testing.T, e *env, resp ipc.Response) { wantStatus(t, e, "work", store.TaskPaused) },
		},
		{
			name: "main resumes another group's task", from: "main",
			req: func(t *testing.T, e *env) ipc.Request {
				pause(t, e, "work")
				return mustRequest(t, ipc.TypeResumeTask, e.tasks["work"].ID)
			},
			check: func(t *testing.T, e *env, resp ipc.Response) { wantStatus(t, e, "work", store.TaskActive) },
		},
		{
			name: "main cancels another group's task", from: "main",
			req: func(t *testing.T, e *env) ipc.Request {
				return mustRequest(t, ipc.TypeCancelTask, e.tasks["work"].ID)
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				if _, ok := e.task(t, e.tasks["work"].ID); ok {
					t.Error("task still exists; want it deleted")
				}
			},
		},
		{
			name: "main updates another group's task", from: "main",
			req: func(t *testing.T, e *env) ipc.Request {
				return ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(e.tasks["work"].ID), ScheduleType: ptr(schedule.Interval), ScheduleValue: ptr("2h")})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				got, _ := e.task(t, e.tasks["work"].ID)
				if got.Kind != store.TaskInterval || got.Value != "2h" || got.NextRun == nil || !got.NextRun.Equal(now.Add(2*time.Hour)) {
					t.Errorf("task %s %q next %v; want interval 2h next %s", got.Kind, got.Value, got.NextRun, now.Add(2*time.Hour))
				}
			},
		},
		{
			name: "other group pauses another group's task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				return mustRequest(t, ipc.TypePauseTask, e.tasks["work"].ID)
			},
			wantErr: "not found",
		},
		{
			name: "other group resumes another group's task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				pause(t, e, "work")
				return mustRequest(t, ipc.TypeResumeTask, e.tasks["work"].ID)
			},
			wantErr: "not found",
		},
		{
			name: "other group cancels the main group's task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				return mustRequest(t, ipc.TypeCancelTask, e.tasks["main"].ID)
			},
			wantErr: "not found",
		},
		{
			name: "other group updates another group's task", from: "family",
			req: func(t *testing.T, e *env) ipc.Request {
				return ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(e.tasks["work"].ID), Prompt: ptr("mine now")})
			},
			wantErr: "not found",
		},
		// register_group, list_groups
		{
			name: "main registers a group", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.RegisterGroupArgs{Chat: strangerChat, Name: "Book club", Folder: "books", RequiresTrigger: ptr(false)})
			},
			check: func(t *testing.T, e *env, resp ipc.Response) {
				info := decodeData[ipc.GroupInfo](t, resp)
				if info.Folder != "books" || info.Chat != strangerChat || !info.Registered {
					t.Errorf("answer %+v; want books registered for %s", info, strangerChat)
				}
				g, err := e.db.Groups.ByFolder(context.Background(), "books")
				if err != nil {
					t.Fatalf("group not stored: %v", err)
				}
				if g.Chat != strangerChat || g.Name != "Book club" || g.Trigger != "@Andy" || g.RequiresTrigger || g.IsMain {
					t.Errorf("stored %+v; want chat %s, name Book club, trigger @Andy, no trigger required, not main", g, strangerChat)
				}
				for _, dir := range []string{"groups/books", "data/ipc/books/requests", "data/ipc/books/responses", "data/sessions/books/.claude"} {
					if fi, err := os.Stat(e.home + "/" + dir); err != nil || !fi.IsDir() {
						t.Errorf("directory %s missing: %v", dir, err)
					}
				}
				if _, err := os.Stat(e.home + "/groups/books/CLAUDE.md"); !os.IsNotExist(err) {
					t.Errorf("groups/books/CLAUDE.md exists (err %v); want no template for a plain group", err)
				}
			},
		},
		{
			name: "main registers a group with a hostile folder", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.RegisterGroupArgs{Chat: strangerChat, Name: "x", Folder: "../x"})
			},
			wantErr: "invalid group folder",
		},
		{
			name: "main registers a chat that is already registered", from: "main",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.RegisterGroupArgs{Chat: "local:work", Name: "x", Folder: "work2"})
			},
			wantErr: "already registered",
		},
		{
			name: "other group registers a group", from: "family",
			req: func(*testing.T, *env) ipc.Request {
				return ipc.NewRequest(ipc.RegisterGroupArgs{Chat: strangerChat, Name: "Book club", Folder: "books"})
			},
			wantErr: "refused: only the main group can register groups",
		},
		{
			name: "main lists groups", from: "main",
			req: func(*testing.T, *env) ipc.Request { return ipc.NewRequest(ipc.ListGroupsArgs{Refresh: true}) },
			check: func(t *testing.T, e *env, resp ipc.Response) {
				list := decodeData[[]ipc.GroupInfo](t, resp)
				byChat := map[string]ipc.GroupInfo{}
				for _, g := range list {
					byChat[g.Chat] = g
				}
				if g := byChat[strangerChat]; g.Registered || g.Name != "Book club" || g.Kind != ipc.ChatGroup {
					t.Errorf("stranger chat %+v; want an unregistered group, named Book club", g)
				}
				if g := byChat["local:main"]; g.Kind != ipc.ChatLocal {
					t.Errorf("main chat %+v; want kind local", g)
				}
				if k := chatKind("4915112345678@s.whatsapp.net", false); k != ipc.ChatPerson {
					t.Errorf("a direct chat's kind %q; want person", k)
				}
				if g := byChat["local:main"]; !g.Registered || !g.IsMain || g.Folder != "main" {
					t.Errorf("main chat %+v; want registered main", g)
				}
				if g := byChat["local:work"]; !g.Registered || g.IsMain || g.Folder != "work" {
					t.Errorf("work chat %+v; want registered, not main", g)
				}
				if len(list) != 4 {
					t.Errorf("listed %d chats; want 4", len(list))
				}
				if n := e.refresh.n.Load(); n != 1 {
					t.Errorf("refreshed %d times; want 1", n)
				}
			},
		},
		{
			name: "other group lists groups", from: "family",
			req:     func(*testing.T, *env) ipc.Request { return ipc.NewRequest(ipc.ListGroupsArgs{Refresh: true}) },
			wantErr: "refused: only the main group can list groups",
			check: func(t *testing.T, e *env, resp ipc.Response) {
				if n := e.refresh.n.Load(); n != 0 {
					t.Errorf("refreshed %d times; want 0", n)
				}
			},
		},
		// identity
		{
			name: "a folder that is not registered", from: "ghost",
			req:     func(*testing.T, *env) ipc.Request { return ipc.NewRequest(ipc.SendMessageArgs{Text: "boo"}) },
			wantErr: "refused: group ghost is not registered",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			req := tt.req(t, e)
			before := e.snapshot(t)
			resp := e.h.Handle(context.Background(), string(tt.from), req)
			if resp.ID != req.ID {
				t.Errorf("response id %q; want %q", resp.ID, req.ID)
			}
			if err := resp.Validate(); err != nil {
				t.Errorf("invalid response: %v", err)
			}
			if tt.wantErr == "" {
				if !resp.OK {
					t.Fatalf("got error %q; want ok", resp.Error)
				}
			} else {
				if resp.OK {
					t.Fatalf("got ok %s; want error %q", resp.Data, tt.wantErr)
				}
				if !strings.Contains(resp.Error, tt.wantErr) {
					t.Errorf("got error %q; want it to contain %q", resp.Error, tt.wantErr)
				}
				if after := e.snapshot(t); after != before {
					t.Errorf("a refused request changed the store:\nbefore %s\nafter  %s", before, after)
				}
				if n := len(e.msg.sent()); n != 0 {
					t.Errorf("messenger called %d times; want 0", n)
				}
			}
			if tt.check != nil {
				tt.check(t, e, resp)
			}
		})
	}
}

// Another group's task and a task that does not exist get the same answer,
// so a non-main group cannot probe which ids exist.
func TestForeignTaskLooksMissing(t *testing.T) {
	e := newEnv(t)
	for _, kind := range []ipc.RequestType{ipc.TypePauseTask, ipc.TypeResumeTask, ipc.TypeCancelTask} {
		foreign := e.h.Handle(context.Background(), "family", mustRequest(t, kind, e.tasks["work"].ID))
		missing := e.h.Handle(context.Background(), "family", mustRequest(t, kind, "task-000000000000"))
		norm := func(s string, id store.TaskID) string { return strings.ReplaceAll(s, string(id), "ID") }
		if foreign.OK || norm(foreign.Error, e.tasks["work"].ID) != norm(missing.Error, "task-000000000000") {
			t.Errorf("%s: foreign task answered %q, missing task %q; want the same answer", kind, foreign.Error, missing.Error)
		}
	}
}

func TestScheduleTask(t *testing.T) {
	tests := []struct {
		name     string
		kind     schedule.Kind
		value    string
		wantNext string // RFC 3339 in Berlin
		wantErr  error  // the schedule package's error, compared by text
		errText  string
	}{
		{name: "cron in the configured timezone", kind: schedule.Cron, value: "0 9 * * 1-5", wantNext: "2026-11-23T09:00:00+01:00"},
		{name: "interval counted from now", kind: schedule.Interval, value: "1h30m", wantNext: "2026-11-22T11:00:00+01:00"},
		{name: "once in local time", kind: schedule.Once, value: "2026-11-24 18:00", wantNext: "2026-11-24T18:00:00+01:00"},
		{name: "once in RFC 3339", kind: schedule.Once, value: "2026-11-24T17:00:00Z", wantNext: "2026-11-24T18:00:00+01:00"},
		{name: "invalid cron", kind: schedule.Cron, value: "0 25 * * *", wantErr: parseErr(schedule.Cron, "0 25 * * *")},
		{name: "six-field cron", kind: schedule.Cron, value: "0 0 9 * * *", wantErr: parseErr(schedule.Cron, "0 0 9 * * *")},
		{name: "cron that never fires", kind: schedule.Cron, value: "0 0 30 2 *", wantErr: parseErr(schedule.Cron, "0 0 30 2 *")},
		{name: "interval in milliseconds", kind: schedule.Interval, value: "3600000", wantErr: parseErr(schedule.Interval, "3600000")},
		{name: "interval too short", kind: schedule.Interval, value: "10s", wantErr: parseErr(schedule.Interval, "10s")},
		{name: "once garbage", kind: schedule.Once, value: "tomorrow-ish", wantErr: parseErr(schedule.Once, "tomorrow-ish")},
		{name: "once in the past", kind: schedule.Once, value: "2026-11-21 09:00", errText: `invalid time "2026-11-21 09:00": it is in the past`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			before := e.snapshot(t)
			wakes := e.waker.n.Load()
			req := ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "check the weather", ScheduleType: tt.kind, ScheduleValue: tt.value})
			resp := e.h.Handle(context.Background(), "family", req)
			if tt.wantErr != nil || tt.errText != "" {
				want := tt.errText
				if tt.wantErr != nil {
					want = tt.wantErr.Error()
				}
				if resp.OK || !strings.Contains(resp.Error, want) {
					t.Fatalf("got ok=%v error %q; want the exact reason %q", resp.OK, resp.Error, want)
				}
				if after := e.snapshot(t); after != before {
					t.Error("a refused schedule changed the store")
				}
				return
			}
			if !resp.OK {
				t.Fatalf("got error %q; want ok", resp.Error)
			}
			info := decodeData[ipc.TaskInfo](t, resp)
			if info.NextRun != tt.wantNext {
				t.Errorf("next run %q; want %q", info.NextRun, tt.wantNext)
			}
			stored, ok := e.task(t, store.TaskID(info.ID))
			if !ok {
				t.Fatalf("task %s not stored", info.ID)
			}
			if stored.NextRun == nil || stored.NextRun.In(e.loc).Format(time.RFC3339) != tt.wantNext {
				t.Errorf("stored next run %v; want %s", stored.NextRun, tt.wantNext)
			}
			if stored.Chat != "local:family" || stored.Folder != "family" || stored.Status != store.TaskActive {
				t.Errorf("stored %+v; want an active task of family for local:family", stored)
			}
			if e.waker.n.Load() != wakes+1 {
				t.Errorf("scheduler woken %d times; want once", e.waker.n.Load()-wakes)
			}
		})
	}
}

func parseErr(kind schedule.Kind, value string) error {
	loc, _ := time.LoadLocation("Europe/Berlin")
	_, err := schedule.Parse(kind, value, loc)
	if err == nil {
		panic("schedule " + value + " parses")
	}
	return err
}

func TestTaskStates(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(t *testing.T, e *env, id store.TaskID)
		req     func(t *testing.T, id store.TaskID) ipc.Request
		wantErr string
		check   func(t *testing.T, got store.Task)
	}{
		{
			name: "pausing a paused task keeps it paused",
			setup: func(t *testing.T, e *env, id store.TaskID) {
				if err := e.db.Tasks.Pause(ctx, id, "by hand"); err != nil {
					t.Fatal(err)
				}
			},
			req: func(t *testing.T, id store.TaskID) ipc.Request { return mustRequest(t, ipc.TypePauseTask, id) },
			check: func(t *testing.T, got store.Task) {
				if got.Status != store.TaskPaused {
					t.Errorf("status %s; want paused", got.Status)
				}
			},
		},
		{
			name: "resume skips the slots missed while paused",
			setup: func(t *testing.T, e *env, id store.TaskID) {
				task, _ := e.task(t, id)
				past := now.Add(-72 * time.Hour)
				task.NextRun, task.Status = &past, store.TaskPaused
				if err := e.db.Tasks.Update(ctx, task); err != nil {
					t.Fatal(err)
				}
			},
			req: func(t *testing.T, id store.TaskID) ipc.Request { return mustRequest(t, ipc.TypeResumeTask, id) },
			check: func(t *testing.T, got store.Task) {
				want := time.Date(2026, 11, 22, 10, 30, 0, 0, berlinLoc()) // today's 10:30, not three days ago
				if got.Status != store.TaskActive || got.NextRun == nil || !got.NextRun.Equal(want) {
					t.Errorf("status %s next %v; want active, next %s", got.Status, got.NextRun, want)
				}
			},
		},
		{
			name: "pausing a task whose once run is in flight is refused",
			setup: func(t *testing.T, e *env, id store.TaskID) {
				if err := e.db.Tasks.SetStatus(ctx, id, store.TaskRunning); err != nil {
					t.Fatal(err)
				}
			},
			req:     func(t *testing.T, id store.TaskID) ipc.Request { return mustRequest(t, ipc.TypePauseTask, id) },
			wantErr: "is running now",
		},
		{
			name: "resuming a finished task is refused",
			setup: func(t *testing.T, e *env, id store.TaskID) {
				if err := e.db.Tasks.SetStatus(ctx, id, store.TaskDone); err != nil {
					t.Fatal(err)
				}
			},
			req:     func(t *testing.T, id store.TaskID) ipc.Request { return mustRequest(t, ipc.TypeResumeTask, id) },
			wantErr: "is done",
		},
		{
			name: "a new schedule makes a finished task active again",
			setup: func(t *testing.T, e *env, id store.TaskID) {
				if err := e.db.Tasks.SetStatus(ctx, id, store.TaskDone); err != nil {
					t.Fatal(err)
				}
			},
			req: func(t *testing.T, id store.TaskID) ipc.Request {
				return ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(id), ScheduleType: ptr(schedule.Once), ScheduleValue: ptr("2026-11-23 08:00")})
			},
			check: func(t *testing.T, got store.Task) {
				want := time.Date(2026, 11, 23, 8, 0, 0, 0, berlinLoc())
				if got.Status != store.TaskActive || got.Kind != store.TaskOnce || got.NextRun == nil || !got.NextRun.Equal(want) {
					t.Errorf("got %s %s next %v; want active once at %s", got.Status, got.Kind, got.NextRun, want)
				}
			},
		},
		{
			name: "an update with an invalid schedule changes nothing",
			req: func(t *testing.T, id store.TaskID) ipc.Request {
				return ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(id), Prompt: ptr("changed"), ScheduleType: ptr(schedule.Cron), ScheduleValue: ptr("every day")})
			},
			wantErr: "invalid cron expression",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			id := e.tasks["family"].ID
			if tt.setup != nil {
				tt.setup(t, e, id)
			}
			before := e.snapshot(t)
			resp := e.h.Handle(ctx, "family", tt.req(t, id))
			if tt.wantErr != "" {
				if resp.OK || !strings.Contains(resp.Error, tt.wantErr) {
					t.Fatalf("got ok=%v error %q; want error containing %q", resp.OK, resp.Error, tt.wantErr)
				}
				if e.snapshot(t) != before {
					t.Error("a refused request changed the store")
				}
				return
			}
			if !resp.OK {
				t.Fatalf("got error %q; want ok", resp.Error)
			}
			got, _ := e.task(t, id)
			tt.check(t, got)
		})
	}
}

func berlinLoc() *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	return loc
}

func TestSendMessageFailure(t *testing.T) {
	e := newEnv(t)
	e.msg.err = errors.New("nothing left to send after removing internal blocks")
	resp := e.h.Handle(context.Background(), "family", ipc.NewRequest(ipc.SendMessageArgs{Text: "<internal>x</internal>"}))
	if resp.OK || !strings.Contains(resp.Error, "nothing left to send") {
		t.Errorf("got ok=%v error %q; want the messenger's reason", resp.OK, resp.Error)
	}
}

// Handle is exported: a request built by hand, even a nonsensical one, gets
// an answer and no panic.
func TestHandleOddRequests(t *testing.T) {
	e := newEnv(t)
	for _, req := range []ipc.Request{
		{ID: "a1", Type: ipc.TypeSendMessage},
		{ID: "a2", Type: ipc.TypeSendMessage, Args: ipc.ListTasksArgs{}},
		{ID: "a3", Type: "launch_missiles", Args: ipc.ListTasksArgs{}},
		{ID: "a4", Type: ipc.TypeSendMessage, Args: ipc.SendMessageArgs{Text: ""}},
	} {
		resp := e.h.Handle(context.Background(), "family", req)
		if resp.OK || resp.ID != req.ID || resp.Error == "" {
			t.Errorf("%+v: got %+v; want an error response", req, resp)
		}
	}
	if n := len(e.outbox(t)); n != 0 {
		t.Errorf("%d outbox rows; want 0", n)
	}
}

func wantSent(t *testing.T, e *env, resp ipc.Response, chat, folder string) {
	t.Helper()
	res := decodeData[ipc.SendResult](t, resp)
	if res.Chat != chat {
		t.Errorf("answered chat %q; want %q", res.Chat, chat)
	}
	items := e.outbox(t)
	if len(items) != 1 {
		t.Fatalf("%d outbox rows; want 1", len(items))
	}
	it := items[0]
	if string(it.Chat) != chat || string(it.Group) != folder || it.Origin != store.OriginTool || it.Text != "hello" || int64(it.ID) != res.OutboxID {
		t.Errorf("outbox row %+v; want chat %s, group %s, origin tool, text hello, id %d", it, chat, folder, res.OutboxID)
	}
}

func wantScheduled(t *testing.T, e *env, resp ipc.Response, folder store.Folder) ipc.TaskInfo {
	t.Helper()
	info := decodeData[ipc.TaskInfo](t, resp)
	task, ok := e.task(t, store.TaskID(info.ID))
	if !ok {
		t.Fatalf("task %q not stored", info.ID)
	}
	if task.Folder != folder || task.Chat != chatOf(folder) {
		t.Errorf("task of %s for %s; want %s for %s", task.Folder, task.Chat, folder, chatOf(folder))
	}
	if want := "2026-11-23T09:00:00+01:00"; info.NextRun != want || info.Group != string(folder) {
		t.Errorf("answer %+v; want next run %s, group %s", info, want, folder)
	}
	if e.waker.n.Load() == 0 {
		t.Error("scheduler not woken")
	}
	return info
}

func wantStatus(t *testing.T, e *env, folder store.Folder, want store.TaskStatus) {
	t.Helper()
	got, ok := e.task(t, e.tasks[folder].ID)
	if !ok || got.Status != want {
		t.Errorf("%s's task status %s (exists %v); want %s", folder, got.Status, ok, want)
	}
	if e.waker.n.Load() == 0 {
		t.Error("scheduler not woken")
	}
}

func pause(t *testing.T, e *env, folder store.Folder) {
	t.Helper()
	if err := e.db.Tasks.Pause(context.Background(), e.tasks[folder].ID, ""); err != nil {
		t.Fatalf("pause: %v", err)
	}
}

func taskGroups(list []ipc.TaskInfo) []string {
	var out []string
	for _, ti := range list {
		out = append(out, ti.Group)
	}
	slices.Sort(out)
	return out
}

// An action other than a message holds the group's turn through the
// Messenger, applies it inside the transaction that commits the action and
// releases it once, saying whether the action committed; a message and a
// listing hold nothing.
func TestActionsHoldTheTurn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if resp := e.h.Handle(ctx, "family", ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"})); !resp.OK {
		t.Fatalf("send_message: %s", resp.Error)
	}
	if resp := e.h.Handle(ctx, "family", ipc.NewRequest(ipc.ListTasksArgs{})); !resp.OK {
		t.Fatalf("list_tasks: %s", resp.Error)
	}
	if n := len(e.msg.held()); n != 0 {
		t.Fatalf("%d turns held by a message and a listing; want none", n)
	}

	ok := ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *"})
	if resp := e.h.Handle(ctx, "family", ok); !resp.OK {
		t.Fatalf("schedule_task: %s", resp.Error)
	}
	refused := ipc.NewRequest(ipc.RegisterGroupArgs{Chat: "local:new", Name: "New", Folder: "new"})
	if resp := e.h.Handle(ctx, "family", refused); resp.OK {
		t.Fatal("register_group from a non-main group succeeded")
	}
	holds := e.msg.held()
	if len(holds) != 2 {
		t.Fatalf("%d turns held; want 2", len(holds))
	}
	if h := holds[0]; h.folder != "family" || h.applied != 1 || h.released != 1 || !h.committed {
		t.Errorf("schedule_task's hold %+v; want family's, applied and released once, committed", *h)
	}
	if h := holds[1]; h.applied != 0 || h.released != 1 || h.committed {
		t.Errorf("refused register_group's hold %+v; want not applied, released once, not committed", *h)
	}
}
