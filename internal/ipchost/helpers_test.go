package ipchost

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// now is the fixed clock of the tests: 09:30 in Berlin.
var now = time.Date(2026, 11, 22, 8, 30, 0, 0, time.UTC)

// fakeMessenger commits messages to the real outbox, as the router does, and
// records the calls.
type fakeMessenger struct {
	db    *store.DB
	mu    sync.Mutex
	calls []sendCall
	holds []*fakeHold
	err   error // returned instead of committing, when set
}

type sendCall struct {
	chat, text, folder string
	origin             store.Origin
}

func (m *fakeMessenger) SendMessage(ctx context.Context, unit store.Unit, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	m.mu.Lock()
	m.calls = append(m.calls, sendCall{chat: chat, text: text, folder: folder, origin: origin})
	err := m.err
	m.mu.Unlock()
	if err != nil {
		return store.OutboxItem{}, err
	}
	var stored store.OutboxItem
	err = m.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if stored, err = tx.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(chat), Group: store.Folder(folder), Text: text, Origin: origin}); err != nil {
			return err
		}
		if unit != nil {
			return unit.Apply(ctx, tx, stored)
		}
		return nil
	})
	return stored, err
}

// HoldTurn returns a hold that records what was done with it.
func (m *fakeMessenger) HoldTurn(_ context.Context, folder string) TurnHold {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &fakeHold{folder: folder}
	m.holds = append(m.holds, h)
	return h
}

// held returns the holds taken so far.
func (m *fakeMessenger) held() []*fakeHold {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*fakeHold(nil), m.holds...)
}

// fakeHold is a turn held for an action: it counts its applications and
// keeps how it was released.
type fakeHold struct {
	folder    string
	applied   int
	released  int
	committed bool
}

func (h *fakeHold) Apply(context.Context, *store.Tx) error { h.applied++; return nil }

func (h *fakeHold) Release(_ context.Context, committed bool) { h.released++; h.committed = committed }

func (m *fakeMessenger) sent() []sendCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sendCall(nil), m.calls...)
}

type fakeWaker struct{ n atomic.Int32 }

func (w *fakeWaker) Wake() { w.n.Add(1) }

type fakeRefresher struct {
	n   atomic.Int32
	err error
}

func (r *fakeRefresher) RefreshGroups(context.Context) error {
	r.n.Add(1)
	return r.err
}

// env is a home directory with a database holding three groups (main,
// family, work), a chat seen but not registered, and one task per group.
type env struct {
	home    string
	db      *store.DB
	loc     *time.Location
	msg     *fakeMessenger
	waker   *fakeWaker
	refresh *fakeRefresher
	h       *Host
	tasks   map[store.Folder]store.Task
}

const strangerChat = "120363000000000001@g.us"

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	db := storetest.OpenHome(t, home)
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("load Europe/Berlin: %v", err)
	}
	e := &env{
		home: home, db: db, loc: loc,
		msg:     &fakeMessenger{db: db},
		waker:   &fakeWaker{},
		refresh: &fakeRefresher{},
		tasks:   map[store.Folder]store.Task{},
	}
	for _, f := range []store.Folder{"main", "family", "work"} {
		if _, err := db.Groups.Add(ctx, store.Group{
			Chat: chatOf(f), Folder: f, Name: "The " + string(f), Trigger: "@Andy", RequiresTrigger: f != "main", IsMain: f == "main",
		}); err != nil {
			t.Fatalf("add group %s: %v", f, err)
		}
		next := now.Add(time.Hour)
		task, err := db.Tasks.Create(ctx, store.Task{
			Folder: f, Chat: chatOf(f), Prompt: "daily summary for " + string(f),
			Kind: store.TaskCron, Value: "30 10 * * *", ContextMode: store.ContextGroup, NextRun: &next,
		})
		if err != nil {
			t.Fatalf("create task: %v", err)
		}
		e.tasks[f] = task
	}
	if err := db.Chats.Upsert(ctx, store.Chat{ID: strangerChat, Name: "Book club", Channel: "whatsapp", IsGroup: true, LastActivity: now}); err != nil {
		t.Fatalf("upsert chat: %v", err)
	}
	h, err := New(Config{Home: home, Timezone: loc, AssistantName: "Andy", Sweep: time.Hour}, db, e.msg, e.waker, e.refresh, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.now = func() time.Time { return now }
	e.h = h
	return e
}

func chatOf(f store.Folder) store.ChatID { return store.ChatID("local:" + string(f)) }

// snapshot renders everything a request could change.
func (e *env) snapshot(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	tasks, err := e.db.Tasks.List(ctx, "")
	if err != nil {
		t.Fatalf("list tasks: %v", err)
	}
	groups, err := e.db.Groups.List(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	outbox, err := e.db.Outbox.Pending(ctx, 0)
	if err != nil {
		t.Fatalf("pending outbox: %v", err)
	}
	chats, err := e.db.Chats.List(ctx)
	if err != nil {
		t.Fatalf("list chats: %v", err)
	}
	b, err := json.Marshal(struct {
		Tasks  []store.Task
		Groups []store.Group
		Outbox []store.OutboxItem
		Chats  []store.Chat
	}{tasks, groups, outbox, chats})
	if err != nil {
		t.Fatalf("marshal snapshot: %v", err)
	}
	return string(b)
}

func (e *env) task(t *testing.T, id store.TaskID) (store.Task, bool) {
	t.Helper()
	task, err := e.db.Tasks.Get(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Task{}, false
	}
	if err != nil {
		t.Fatalf("get task: %v", err)
	}
	return task, true
}

func (e *env) outbox(t testing.TB) []store.OutboxItem {
	t.Helper()
	items, err := e.db.Outbox.Pending(context.Background(), 0)
	if err != nil {
		t.Fatalf("pending outbox: %v", err)
	}
	return items
}

func decodeData[T any](t *testing.T, resp ipc.Response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(resp.Data, &v); err != nil {
		t.Fatalf("decode response data %s: %v", resp.Data, err)
	}
	return v
}

func mustRequest(t *testing.T, kind ipc.RequestType, taskID store.TaskID) ipc.Request {
	t.Helper()
	r, err := ipc.NewTaskIDRequest(kind, string(taskID))
	if err != nil {
		t.Fatalf("NewTaskIDRequest: %v", err)
	}
	return r
}

func ptr[T any](v T) *T { return &v }
