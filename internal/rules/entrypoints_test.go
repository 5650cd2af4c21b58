package rules_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// The same case through both doors: the command line and control API
// (control.Admin) and the main agent's tools (ipchost.Host.Handle). Every
// divergence issue 12 found is a row here; both must agree on the outcome,
// the stored result and the reason.

type nopMessenger struct{}

func (nopMessenger) SendMessage(context.Context, store.Unit, string, string, store.Origin, string) (store.OutboxItem, error) {
	return store.OutboxItem{}, nil
}

func (nopMessenger) HoldTurn(context.Context, string) ipchost.TurnHold { return nopHold{} }

// nopHold holds no turn.
type nopHold struct{}

func (nopHold) Apply(context.Context, *store.Tx) error { return nil }
func (nopHold) Release(context.Context, bool)          {}

// door is one entry point over its own fresh home and database, holding
// the main group (local:main).
type door struct {
	name string
	db   *store.DB
	// register and task answer an error text ("" when done).
	register func(t *testing.T, chat, name, folder, trigger string) string
	task     func(t *testing.T, action ipc.RequestType, id store.TaskID) string
}

func openDB(t *testing.T, dir string) *store.DB {
	t.Helper()
	db := storetest.OpenHome(t, dir)
	if _, err := db.Groups.Add(context.Background(), store.Group{Chat: "local:main", Name: "main", Folder: "main", Trigger: "@Andy", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	return db
}

func cliDoor(t *testing.T) door {
	db := openDB(t, t.TempDir())
	a := &control.Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	return door{
		name: "cli", db: db,
		register: func(t *testing.T, chat, name, folder, trigger string) string {
			_, err := a.AddGroup(context.Background(), control.GroupAdd{Chat: chat, Name: name, Folder: folder, Trigger: trigger})
			return errText(err)
		},
		task: func(t *testing.T, action ipc.RequestType, id store.TaskID) string {
			var err error
			switch action {
			case ipc.TypePauseTask:
				_, err = a.PauseTask(context.Background(), string(id))
			case ipc.TypeResumeTask:
				_, err = a.ResumeTask(context.Background(), string(id))
			case ipc.TypeCancelTask:
				err = a.CancelTask(context.Background(), string(id))
			}
			return errText(err)
		},
	}
}

func agentDoor(t *testing.T) door {
	dir := t.TempDir()
	db := openDB(t, dir)
	h, err := ipchost.New(ipchost.Config{Home: dir, Timezone: time.UTC, AssistantName: "Andy"}, db, nopMessenger{}, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	handle := func(req ipc.Request) string {
		resp := h.Handle(context.Background(), "main", req)
		if resp.OK {
			return ""
		}
		return resp.Error
	}
	return door{
		name: "agent", db: db,
		register: func(t *testing.T, chat, name, folder, trigger string) string {
			return handle(ipc.NewRequest(ipc.RegisterGroupArgs{Chat: chat, Name: name, Folder: folder, Trigger: trigger}))
		},
		task: func(t *testing.T, action ipc.RequestType, id store.TaskID) string {
			req, err := ipc.NewTaskIDRequest(action, string(id))
			if err != nil {
				t.Fatal(err)
			}
			return handle(req)
		},
	}
}

func doors(t *testing.T) []door { return []door{cliDoor(t), agentDoor(t)} }

// sameReason fails unless both doors refused for the same reason: the
// agent's text (which carries no class prefix) is part of the command
// line's.
func sameReason(t *testing.T, cli, agent string) {
	t.Helper()
	if agent == "" || cli == "" || !strings.Contains(cli, agent) {
		t.Errorf("the command line answered %q, the agent's tool %q; want the same refusal", cli, agent)
	}
}

func TestRegisterGroupBothDoors(t *testing.T) {
	tests := []struct {
		name                         string
		chat, gname, folder, trigger string
		wantErr                      string // in both answers; empty: registered
		wantTrigger                  string
	}{
		{name: "path in a local chat id", chat: "local:../../x", gname: "x", folder: "x", wantErr: "chat id"},
		{name: "unknown chat id", chat: "x@g.us", gname: "x", folder: "x", wantErr: "chat id"},
		{name: "newline in the trigger", chat: "local:nl", gname: "nl", folder: "nl", trigger: "@nl\nx", wantErr: "trigger"},
		{name: "trigger without @", chat: "local:noat", gname: "noat", folder: "noat", trigger: "Bob", wantTrigger: "@Bob"},
		{name: "trigger padded", chat: " local:pad ", gname: " Pad ", folder: "pad", trigger: "  @Pad ", wantTrigger: "@Pad"},
		{name: "default trigger", chat: "120363000000000001@g.us", gname: "Book club", folder: "books", wantTrigger: "@Andy"},
		{name: "hostile folder", chat: "local:x", gname: "x", folder: "../x", wantErr: "invalid group folder"},
		{name: "reserved folder", chat: "local:x", gname: "x", folder: "global", wantErr: "reserved"},
		{name: "newline in the name", chat: "local:x", gname: "two\nlines", folder: "x", wantErr: "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := doors(t)
			var answers []string
			for _, d := range ds {
				got := d.register(t, tt.chat, tt.gname, tt.folder, tt.trigger)
				answers = append(answers, got)
				gs, err := d.db.Groups.List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if tt.wantErr != "" {
					if !strings.Contains(got, tt.wantErr) || len(gs) != 1 {
						t.Errorf("%s: got %q with %d groups; want a refusal containing %q and nothing stored", d.name, got, len(gs), tt.wantErr)
					}
					continue
				}
				if got != "" || len(gs) != 2 {
					t.Fatalf("%s: got %q with %d groups; want the group registered", d.name, got, len(gs))
				}
				g := gs[0]
				if g.IsMain {
					g = gs[1]
				}
				if g.Trigger != tt.wantTrigger || string(g.Chat) != strings.TrimSpace(tt.chat) || g.Name != strings.TrimSpace(tt.gname) || !g.RequiresTrigger {
					t.Errorf("%s: stored %+v; want chat %q, name %q, trigger %s, trigger required", d.name, g,
						strings.TrimSpace(tt.chat), strings.TrimSpace(tt.gname), tt.wantTrigger)
				}
			}
			if tt.wantErr != "" {
				sameReason(t, answers[0], answers[1])
			}
		})
	}
}

func TestTaskStatesBothDoors(t *testing.T) {
	now := time.Now().UTC()
	tests := []struct {
		name    string
		folder  store.Folder // the task's group; "gone" is not registered
		kind    store.TaskKind
		value   string
		status  store.TaskStatus
		next    *time.Time
		action  ipc.RequestType
		wantErr string // in both answers; empty: done
		// wantNext computes the stored next run from the schedule (nil:
		// none expected).
		wantNext func(sc schedule.Schedule) *time.Time
	}{
		{name: "resume a running task", folder: "main", kind: store.TaskOnce, value: "2026-01-01 09:00", status: store.TaskRunning,
			action: ipc.TypeResumeTask, wantErr: "is running now"},
		{name: "resume a once task with no run left", folder: "main", kind: store.TaskOnce, value: "2026-01-01 09:00", status: store.TaskPaused,
			action: ipc.TypeResumeTask, wantErr: "no run left"},
		{name: "resume a done task", folder: "main", kind: store.TaskOnce, value: "2026-01-01 09:00", status: store.TaskDone,
			action: ipc.TypeResumeTask, wantErr: "is done"},
		{name: "resume a task of a removed group", folder: "gone", kind: store.TaskInterval, value: "1h", status: store.TaskPaused, next: ptr(now.Add(time.Hour)),
			action: ipc.TypeResumeTask, wantErr: "not registered"},
		{name: "resume a cron task that missed its slots", folder: "main", kind: store.TaskCron, value: "0 9 * * *", status: store.TaskPaused,
			next: ptr(now.Add(-72 * time.Hour)), action: ipc.TypeResumeTask,
			wantNext: func(sc schedule.Schedule) *time.Time { n := sc.Next(now.Add(-72*time.Hour), now, time.UTC); return &n }},
		{name: "resume an interval task keeps its anchor", folder: "main", kind: store.TaskInterval, value: "1h", status: store.TaskPaused,
			next: ptr(now.Add(-150 * time.Minute)), action: ipc.TypeResumeTask,
			wantNext: func(schedule.Schedule) *time.Time { return ptr(now.Add(30 * time.Minute)) }},
		{name: "pause a running task", folder: "main", kind: store.TaskOnce, value: "2026-01-01 09:00", status: store.TaskRunning,
			action: ipc.TypePauseTask, wantErr: "is running now"},
		{name: "pause a done task", folder: "main", kind: store.TaskOnce, value: "2026-01-01 09:00", status: store.TaskDone,
			action: ipc.TypePauseTask, wantErr: "is done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var answers []string
			for _, d := range doors(t) {
				ctx := context.Background()
				tk, err := d.db.Tasks.Create(ctx, store.Task{Folder: tt.folder, Chat: "local:main", Prompt: "p",
					Kind: tt.kind, Value: tt.value, Status: tt.status, NextRun: tt.next})
				if err != nil {
					t.Fatal(err)
				}
				before := dump(t, d.db, tk.ID)
				got := d.task(t, tt.action, tk.ID)
				answers = append(answers, strings.ReplaceAll(got, string(tk.ID), "ID"))
				after, _ := d.db.Tasks.Get(ctx, tk.ID)
				if tt.wantErr != "" {
					if !strings.Contains(got, tt.wantErr) || dump(t, d.db, tk.ID) != before {
						t.Errorf("%s: got %q; want a refusal containing %q that changes nothing", d.name, got, tt.wantErr)
					}
					continue
				}
				if got != "" {
					t.Fatalf("%s: got %q; want done", d.name, got)
				}
				sc, err := schedule.Parse(schedule.Kind(tt.kind), tt.value, time.UTC)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.wantNext(sc)
				if after.Status != store.TaskActive || after.NextRun == nil || after.NextRun.Sub(*want).Abs() > time.Millisecond {
					t.Errorf("%s: stored %s next %v; want active next %v", d.name, after.Status, after.NextRun, want)
				}
			}
			if tt.wantErr != "" {
				sameReason(t, answers[0], answers[1])
			}
		})
	}
}

// dump renders a stored task, to see that a refusal changed nothing.
func dump(t *testing.T, db *store.DB, id store.TaskID) string {
	t.Helper()
	tk, err := db.Tasks.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(tk)
	return string(b)
}

func ptr[T any](v T) *T { return &v }
