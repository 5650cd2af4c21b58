package ipchost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// movingClock makes e's host read a clock the test can move while it runs.
func movingClock(e *env) *atomic.Int64 {
	var c atomic.Int64
	c.Store(now.UnixNano())
	e.h.now = func() time.Time { return time.Unix(0, c.Load()).UTC() }
	return &c
}

func (e *env) removeResponse(t *testing.T, f store.Folder, id string) {
	t.Helper()
	if err := os.Remove(filepath.Join(e.home, "data", "ipc", string(f), ipc.ResponsesDir, id+".json")); err != nil {
		t.Fatal(err)
	}
}

// A request seen again after it was carried out — the daemon stopped
// before its response was written, or the response was lost — is answered
// from the record with the same response and changes nothing more.
func TestReplayedRequestAnsweredFromRecord(t *testing.T) {
	tests := []struct {
		name string
		from store.Folder
		req  func(e *env) ipc.Request
	}{
		{"send_message", "family", func(*env) ipc.Request { return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"}) }},
		{"send_message with a file", "family", func(e *env) ipc.Request {
			dir := filepath.Join(e.home, "groups", "family")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				panic(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("milk"), 0o644); err != nil {
				panic(err)
			}
			return ipc.NewRequest(ipc.SendMessageArgs{Text: "the list", File: "notes.txt"})
		}},
		{"send_message to another chat", "main", func(*env) ipc.Request {
			return ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "local:family"})
		}},
		{"schedule_task", "family", func(*env) ipc.Request {
			return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *"})
		}},
		{"update_task", "family", func(e *env) ipc.Request {
			return ipc.NewRequest(ipc.UpdateTaskArgs{TaskID: string(e.tasks["family"].ID), ScheduleType: ptr(schedule.Interval), ScheduleValue: ptr("2h")})
		}},
		{"pause_task", "family", func(e *env) ipc.Request { return taskIDRequest(ipc.TypePauseTask, e.tasks["family"].ID) }},
		{"cancel_task", "family", func(e *env) ipc.Request { return taskIDRequest(ipc.TypeCancelTask, e.tasks["family"].ID) }},
		{"register_group", "main", func(*env) ipc.Request {
			return ipc.NewRequest(ipc.RegisterGroupArgs{Chat: strangerChat, Name: "Book club", Folder: "books"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			clock := movingClock(e)
			ch := e.run(t)
			req := tt.req(e)
			writeRequest(t, e.requestsDir(tt.from), req)
			waitHandled(t, ch, tt.from, req.FileName())
			first, ok := e.response(t, tt.from, req.ID)
			if !ok || !first.OK {
				t.Fatalf("first response %+v (exists %v); want ok", first, ok)
			}
			before := e.snapshot(t)

			// Later (a different clock gives a different next run if the
			// schedule were computed again), the request appears again with
			// no response.
			clock.Add(int64(3 * time.Hour))
			e.removeResponse(t, tt.from, req.ID)
			writeRequest(t, e.requestsDir(tt.from), req)
			waitHandled(t, ch, tt.from, req.FileName())
			again, ok := e.response(t, tt.from, req.ID)
			if !ok || !again.OK || string(again.Data) != string(first.Data) {
				t.Errorf("second response %+v (exists %v); want the first one again: %+v", again, ok, first)
			}
			if after := e.snapshot(t); after != before {
				t.Errorf("the request was carried out again:\nbefore %s\nafter  %s", before, after)
			}
			if exists(filepath.Join(e.requestsDir(tt.from), req.FileName())) {
				t.Error("request file still there")
			}
		})
	}
}

func taskIDRequest(kind ipc.RequestType, id store.TaskID) ipc.Request {
	r, err := ipc.NewTaskIDRequest(kind, string(id))
	if err != nil {
		panic(err)
	}
	return r
}

// A request's change and its record commit in one transaction: when the
// record cannot be written, the change is rolled back too.
func TestChangeRolledBackWithItsRecord(t *testing.T) {
	tests := []struct {
		name  string
		from  store.Folder
		req   ipc.Request
		count func(t *testing.T, e *env) int
	}{
		{"send_message", "family", ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"}),
			func(t *testing.T, e *env) int { return len(e.outbox(t)) }},
		{"schedule_task", "family", ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *"}),
			func(t *testing.T, e *env) int {
				tasks, err := e.db.Tasks.List(context.Background(), "")
				if err != nil {
					t.Fatal(err)
				}
				return len(tasks)
			}},
		{"register_group", "main", ipc.NewRequest(ipc.RegisterGroupArgs{Chat: strangerChat, Name: "Book club", Folder: "books"}),
			func(t *testing.T, e *env) int {
				groups, err := e.db.Groups.List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return len(groups)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			n := tt.count(t, e)
			// Another record under the request's key makes its own fail.
			if err := e.db.Tx(ctx, func(tx *store.Tx) error {
				return tx.Requests.Record(ctx, store.HandledRequest{Folder: tt.from, ID: tt.req.ID, Type: "x", Response: []byte(`{}`)})
			}); err != nil {
				t.Fatal(err)
			}
			trees, err := e.h.openTrees(tt.from)
			if err != nil {
				t.Fatal(err)
			}
			defer trees.Close()
			writeRequest(t, e.requestsDir(tt.from), tt.req)
			// Carried out directly, past the look-up that would answer it
			// from the record.
			e.h.answer(ctx, zerolog.Nop(), tt.from, trees, tt.req.FileName(), tt.req)
			resp, ok := e.response(t, tt.from, tt.req.ID)
			if !ok || resp.OK {
				t.Errorf("response %+v (exists %v); want an error", resp, ok)
			}
			if got := tt.count(t, e); got != n {
				t.Errorf("%d rows after the record failed; want %d (the change rolled back with it)", got, n)
			}
		})
	}
}

// At start, requests a previous daemon's container left are moved to the
// group's errors/ and never carried out, and old records are forgotten.
func TestRecoverQuarantinesLeftoverRequests(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	famDir, mainDir := e.requestsDir("family"), e.requestsDir("main")
	var left []ipc.Request
	for i := range 3 {
		req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello " + string(rune('a'+i))})
		writeRequest(t, famDir, req)
		left = append(left, req)
	}
	sched := ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "p", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *"})
	writeRequest(t, mainDir, sched)
	left = append(left, sched)
	writeRaw(t, famDir, "half-written.json.tmp", `{"id":`)
	// A request handled a moment ago stays recorded.
	done := ipc.NewRequest(ipc.SendMessageArgs{Text: "a moment ago"})
	trees, err := e.h.openTrees("work")
	if err != nil {
		t.Fatal(err)
	}
	writeRequest(t, e.requestsDir("work"), done)
	e.h.answer(ctx, zerolog.Nop(), "work", trees, done.FileName(), done)
	trees.Close()
	snap := e.snapshot(t)

	n, err := e.h.Recover(ctx)
	if err != nil || n != 4 {
		t.Fatalf("Recover = %d, %v; want 4 files moved", n, err)
	}
	if _, err := e.db.Requests.Get(ctx, "work", done.ID); err != nil {
		t.Errorf("a recent record was pruned: %v", err)
	}
	if !exists(filepath.Join(famDir, "half-written.json.tmp")) {
		t.Error("a half-written temp file was moved; want it left alone")
	}
	ch := e.run(t)
	// A request of the new daemon's containers is carried out as usual.
	fresh := ipc.NewRequest(ipc.SendMessageArgs{Text: "new"})
	writeRequest(t, famDir, fresh)
	waitHandled(t, ch, "family", fresh.FileName())

	for _, req := range left {
		from := store.Folder("family")
		if req.ID == sched.ID {
			from = "main"
		}
		if exists(filepath.Join(e.requestsDir(from), req.FileName())) {
			t.Errorf("%s/%s still in requests/", from, req.FileName())
		}
		if !exists(filepath.Join(e.home, "data", "ipc", string(from), ErrorsDir, req.FileName())) {
			t.Errorf("%s/%s not in errors/", from, req.FileName())
		}
		if _, ok := e.response(t, from, req.ID); ok {
			t.Errorf("%s/%s answered; want it left unanswered", from, req.FileName())
		}
	}
	items := e.outbox(t)
	if len(items) != 2 || items[1].Text != "new" {
		t.Errorf("outbox %+v; want the earlier message and the new daemon's only", items)
	}
	tasks, _ := e.db.Tasks.List(ctx, "")
	if !strings.Contains(snap, string(tasks[len(tasks)-1].ID)) {
		t.Errorf("a task was scheduled by a leftover request: %+v", tasks[len(tasks)-1])
	}
}
