package ipchost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// handledFile is one file the host dealt with.
type handledFile struct {
	folder store.Folder
	name   string
}

// run starts e.h.Run until the test ends and returns the stream of handled
// files. The sweep is an hour: new files must be noticed through inotify.
func (e *env) run(t *testing.T) <-chan handledFile {
	t.Helper()
	ch := make(chan handledFile, 100)
	e.h.handled = func(f store.Folder, name string) { ch <- handledFile{f, name} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v; want nil after the context ends", err)
		}
	})
	return ch
}

// waitHandled waits until the host has dealt with folder's file name.
func waitHandled(t *testing.T, ch <-chan handledFile, folder store.Folder, name string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f := <-ch:
			if f.folder == folder && f.name == name {
				return
			}
		case <-deadline:
			t.Fatalf("%s/%s not handled within 10s", folder, name)
		}
	}
}

func (e *env) requestsDir(f store.Folder) string {
	return ipc.Layout{Root: filepath.Join(e.home, "data", "ipc", string(f))}.Requests()
}

func (e *env) response(t *testing.T, f store.Folder, id string) (ipc.Response, bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.home, "data", "ipc", string(f), ipc.ResponsesDir, id+".json"))
	if os.IsNotExist(err) {
		return ipc.Response{}, false
	}
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	resp, err := ipc.DecodeResponse(data)
	if err != nil {
		t.Fatalf("decode response %s: %v", data, err)
	}
	return resp, true
}

func (e *env) responseCount(t *testing.T, f store.Folder) int {
	t.Helper()
	names, err := ipc.List(filepath.Join(e.home, "data", "ipc", string(f), ipc.ResponsesDir))
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

func writeRaw(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := ipc.WriteFileAtomic(dir, name, []byte(content)); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
}

func writeRequest(t *testing.T, dir string, req ipc.Request) {
	t.Helper()
	if err := ipc.WriteJSON(dir, req.FileName(), req); err != nil {
		t.Fatalf("write request: %v", err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestRequestWrittenBeforeRunIsAnswered(t *testing.T) {
	e := newEnv(t)
	dir := e.requestsDir("family")
	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"})
	writeRequest(t, dir, req) // the daemon is not running yet
	ch := e.run(t)
	waitHandled(t, ch, "family", req.FileName())

	resp, ok := e.response(t, "family", req.ID)
	if !ok || !resp.OK {
		t.Fatalf("response %+v (exists %v); want ok", resp, ok)
	}
	if exists(filepath.Join(dir, req.FileName())) {
		t.Error("request file still there; want it deleted after answering")
	}
	if n := len(e.outbox(t)); n != 1 {
		t.Errorf("%d outbox rows; want 1", n)
	}
}

func TestRequestAnsweredAndIdentityFromDirectory(t *testing.T) {
	e := newEnv(t)
	ch := e.run(t)
	// Written into family's directory, it acts as family: another chat is refused.
	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "local:main"})
	writeRequest(t, e.requestsDir("family"), req)
	waitHandled(t, ch, "family", req.FileName())
	resp, ok := e.response(t, "family", req.ID)
	if !ok || resp.OK || !strings.Contains(resp.Error, "only the main group") {
		t.Fatalf("response %+v (exists %v); want a refusal", resp, ok)
	}
	// The same request from main's directory is carried out.
	req2 := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello", TargetChat: "local:family"})
	writeRequest(t, e.requestsDir("main"), req2)
	waitHandled(t, ch, "main", req2.FileName())
	if resp, ok := e.response(t, "main", req2.ID); !ok || !resp.OK {
		t.Fatalf("response %+v (exists %v); want ok", resp, ok)
	}
	items := e.outbox(t)
	if len(items) != 1 || items[0].Chat != "local:family" || items[0].Group != "main" {
		t.Errorf("outbox %+v; want one row from main to local:family", items)
	}
}

func TestMalformedFiles(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		content   string
		wantID    string // the id answered; empty: no response possible
		wantError string
	}{
		{name: "not JSON", file: "r-bad.json", content: "{not json", wantID: "r-bad", wantError: "malformed request"},
		{name: "unknown field in args", file: "r1.json",
			content: `{"id":"r1","type":"send_message","args":{"text":"hi","bogus":1}}`, wantID: "r1", wantError: `unknown field "bogus"`},
		{name: "unknown field in envelope, id from the file name", file: "r2.json",
			content: `{"id":"r2","type":"send_message","group":"main","args":{"text":"hi"}}`, wantID: "r2", wantError: `unknown field "group"`},
		{name: "unknown type", file: "r3.json",
			content: `{"id":"r3","type":"rm_rf","args":{}}`, wantID: "r3", wantError: `unknown request type "rm_rf"`},
		{name: "envelope id differs from the file name", file: "r4.json",
			content: `{"id":"r5","type":"send_message","args":{"text":""}}`, wantID: "r5", wantError: "text is empty"},
		{name: "no usable id anywhere", file: "-bad.json",
			content: `{"id":"../../x","type":"send_message","args":{"text":"hi"}}`},
		{name: "not a .json file", file: "notes.txt", content: "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ch := e.run(t)
			dir := e.requestsDir("family")
			name := filepath.Base(tt.file)
			writeRaw(t, dir, name, tt.content)
			waitHandled(t, ch, "family", name)

			if exists(filepath.Join(dir, name)) {
				t.Error("request file still in requests/; want it moved")
			}
			moved := filepath.Join(e.home, "data", "ipc", "family", ErrorsDir, name)
			if data, err := os.ReadFile(moved); err != nil || string(data) != tt.content {
				t.Errorf("data/ipc/family/errors/%s holds %q (%v); want the original content", name, data, err)
			}
			if tt.wantID == "" {
				if n := e.responseCount(t, "family"); n != 0 {
					t.Errorf("%d responses; want none (no id to answer)", n)
				}
			} else {
				resp, ok := e.response(t, "family", tt.wantID)
				if !ok || resp.OK || !strings.Contains(resp.Error, tt.wantError) {
					t.Errorf("response %+v (exists %v); want an error containing %q", resp, ok, tt.wantError)
				}
				if n := e.responseCount(t, "family"); n != 1 {
					t.Errorf("%d responses; want exactly 1", n)
				}
			}
			if n := len(e.outbox(t)); n != 0 {
				t.Errorf("%d outbox rows; want 0", n)
			}
		})
	}
}

func TestInvalidCronAnsweredWithTheParserReason(t *testing.T) {
	e := newEnv(t)
	ch := e.run(t)
	writeRaw(t, e.requestsDir("family"), "c1.json",
		`{"id":"c1","type":"schedule_task","args":{"prompt":"p","schedule_type":"cron","schedule_value":"0 9 * *","context_mode":"group"}}`)
	waitHandled(t, ch, "family", "c1.json")
	resp, ok := e.response(t, "family", "c1")
	want := parseErr("cron", "0 9 * *").Error()
	if !ok || resp.OK || resp.Error != want {
		t.Errorf("response %+v (exists %v); want error %q", resp, ok, want)
	}
}

// A hostile agent writes whatever it likes into its requests directory. The
// daemon answers what it can, moves the rest aside, reads nothing outside
// the directory, and keeps serving.
func TestHostilePayloads(t *testing.T) {
	e := newEnv(t)
	ch := e.run(t)
	dir := e.requestsDir("family")
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"id":"leak","type":"send_message","args":{"text":"TOPSECRET"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	type payload struct {
		name    string
		content string
		make    func(path string) error // instead of content
	}
	payloads := []payload{
		{name: "empty.json", content: ""},
		{name: "null.json", content: "null"},
		{name: "array.json", content: "[]"},
		{name: "string.json", content: `"send_message"`},
		{name: "number.json", content: "1e999"},
		{name: "two.json", content: `{"id":"two","type":"list_tasks","args":{}}{"id":"x"}`},
		{name: "nested.json", content: strings.Repeat("[", 200000) + strings.Repeat("]", 200000)},
		{name: "deep-args.json", content: `{"id":"deep-args","type":"send_message","args":{"text":` + strings.Repeat("[", 100000) + `}}`},
		{name: "huge.json", content: `{"id":"huge","type":"send_message","args":{"text":"` + strings.Repeat("a", 2<<20) + `"}}`},
		{name: "long-text.json", content: `{"id":"long-text","type":"send_message","args":{"text":"` + strings.Repeat("b", ipc.MaxTextBytes+1) + `"}}`},
		{name: "bad-utf8.json", content: "{\"id\":\"bad-utf8\",\"type\":\"send_message\xff\",\"args\":{\"text\":\"\xff\xfe\"}}"},
		{name: "nul.json", content: "{\"id\":\"nul\",\"type\":\"send_message\",\"args\":{\"text\":\"a\x00b\"}}"},
		{name: "args-array.json", content: `{"id":"args-array","type":"send_message","args":["hi"]}`},
		{name: "args-wrong-type.json", content: `{"id":"args-wrong-type","type":"send_message","args":{"text":42}}`},
		{name: "id-traversal.json", content: `{"id":"../../../store/x","type":"list_tasks","args":{}}`},
		{name: "id-object.json", content: `{"id":{"a":1},"type":"list_tasks","args":{}}`},
		{name: "task-id-sql.json", content: `{"id":"task-id-sql","type":"cancel_task","args":{"task_id":"x' OR '1'='1"}}`},
		{name: "folder-traversal.json", content: `{"id":"folder-traversal","type":"schedule_task","args":{"prompt":"p","schedule_type":"cron","schedule_value":"0 9 * * *","target_group":"../main"}}`},
		{name: "symlink.json", make: func(p string) error { return os.Symlink(secret, p) }},
		{name: "fifo.json", make: func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{name: "dir.json", make: func(p string) error { return os.Mkdir(p, 0o755) }},
	}
	for _, p := range payloads {
		path := filepath.Join(dir, p.name)
		if p.make != nil {
			if err := p.make(path); err != nil {
				t.Fatalf("make %s: %v", p.name, err)
			}
			continue
		}
		writeRaw(t, dir, p.name, p.content)
	}
	// Afterwards a good request is still answered.
	good := ipc.NewRequest(ipc.ListTasksArgs{})
	writeRequest(t, dir, good)
	pending := map[string]bool{good.FileName(): true}
	for _, p := range payloads {
		if p.name != "dir.json" { // directories are not requests
			pending[p.name] = true
		}
	}
	deadline := time.After(20 * time.Second)
	for len(pending) > 0 {
		select {
		case f := <-ch:
			delete(pending, f.name)
		case <-deadline:
			t.Fatalf("not handled within 20s: %v", pending)
		}
	}

	if resp, ok := e.response(t, "family", good.ID); !ok || !resp.OK {
		t.Errorf("good request after the garbage: %+v (exists %v); want ok", resp, ok)
	}
	left, err := ipc.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("left in requests/: %v; want nothing", left)
	}
	if n := len(e.outbox(t)); n != 0 {
		t.Errorf("%d outbox rows; want 0", n)
	}
	if n := len(e.msg.sent()); n != 0 {
		t.Errorf("messenger called %d times; want 0", n)
	}
	if _, ok := e.response(t, "family", "leak"); ok {
		t.Error("the symlink's target was read and answered")
	}
	respDir := filepath.Join(e.home, "data", "ipc", "family", ipc.ResponsesDir)
	names, _ := ipc.List(respDir)
	for _, n := range names {
		data, _ := os.ReadFile(filepath.Join(respDir, n))
		if strings.Contains(string(data), "TOPSECRET") {
			t.Errorf("response %s quotes the symlink target's content", n)
		}
	}
	for _, id := range []string{"two", "deep-args", "long-text", "bad-utf8", "args-array", "args-wrong-type", "task-id-sql", "folder-traversal"} {
		if resp, ok := e.response(t, "family", id); !ok || resp.OK {
			t.Errorf("%s: response %+v (exists %v); want an error response", id, resp, ok)
		}
	}
	if _, ok := e.task(t, e.tasks["main"].ID); !ok {
		t.Error("main's task was deleted")
	}
	if _, err := os.Stat(filepath.Join(e.home, "data", "ipc", "store")); err == nil {
		t.Error("a traversal id created a file outside the group's namespace")
	}
	if data, err := os.ReadFile(secret); err != nil || !strings.Contains(string(data), "TOPSECRET") {
		t.Errorf("the symlink target was changed or moved: %q, %v", data, err)
	}
}

// A request whose response already exists was carried out before the daemon
// stopped; it is not carried out again.
func TestAnsweredRequestIsNotRepeated(t *testing.T) {
	e := newEnv(t)
	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"})
	resp, err := ipc.OKResponse(req.ID, ipc.SendResult{OutboxID: 7, Chat: "local:family"})
	if err != nil {
		t.Fatal(err)
	}
	respDir := filepath.Join(e.home, "data", "ipc", "family", ipc.ResponsesDir)
	if err := ipc.WriteJSON(respDir, req.FileName(), resp); err != nil {
		t.Fatal(err)
	}
	writeRequest(t, e.requestsDir("family"), req)
	ch := e.run(t)
	waitHandled(t, ch, "family", req.FileName())
	if n := len(e.outbox(t)); n != 0 {
		t.Errorf("%d outbox rows; want 0 (already answered)", n)
	}
	if exists(filepath.Join(e.requestsDir("family"), req.FileName())) {
		t.Error("request file still there")
	}
	if got, _ := e.response(t, "family", req.ID); !got.OK {
		t.Errorf("the earlier response was replaced: %+v", got)
	}
}

func TestGroupsAddedAndRemovedWhileRunning(t *testing.T) {
	e := newEnv(t)
	ch := e.run(t)

	// main registers a group; its directory is watched at once.
	reg := ipc.NewRequest(ipc.RegisterGroupArgs{Chat: strangerChat, Name: "Book club", Folder: "books"})
	writeRequest(t, e.requestsDir("main"), reg)
	waitHandled(t, ch, "main", reg.FileName())
	if resp, ok := e.response(t, "main", reg.ID); !ok || !resp.OK {
		t.Fatalf("register_group: %+v (exists %v); want ok", resp, ok)
	}
	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"})
	writeRequest(t, e.requestsDir("books"), req)
	waitHandled(t, ch, "books", req.FileName())
	items := e.outbox(t)
	if len(items) != 1 || items[0].Chat != strangerChat || items[0].Group != "books" {
		t.Fatalf("outbox %+v; want one row from books to %s", items, strangerChat)
	}

	// A removed group's requests are no longer handled.
	if err := e.db.Groups.Remove(context.Background(), "work"); err != nil {
		t.Fatal(err)
	}
	if err := e.h.SyncGroups(context.Background()); err != nil {
		t.Fatalf("SyncGroups: %v", err)
	}
	stale := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"})
	writeRequest(t, e.requestsDir("work"), stale)
	e.h.box.Sweep() // as if an event had arrived anyway
	after := ipc.NewRequest(ipc.ListTasksArgs{})
	writeRequest(t, e.requestsDir("family"), after)
	waitHandled(t, ch, "family", after.FileName())
	if _, ok := e.response(t, "work", stale.ID); ok {
		t.Error("a removed group's request was answered")
	}
	if n := len(e.outbox(t)); n != 1 {
		t.Errorf("%d outbox rows; want still 1", n)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		cfg  Config
		db   *store.DB
		m    Messenger
	}{
		{name: "no home", cfg: Config{}, db: e.db, m: e.msg},
		{name: "no database", cfg: Config{Home: e.home}, m: e.msg},
		{name: "no messenger", cfg: Config{Home: e.home}, db: e.db},
		{name: "negative sweep", cfg: Config{Home: e.home, Sweep: -time.Second}, db: e.db, m: e.msg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg, tt.db, tt.m, nil, nil, zerolog.Nop()); err == nil {
				t.Error("New succeeded; want an error")
			}
		})
	}
}

// workersRunning counts the groups whose worker goroutine runs.
func (e *env) workersRunning() int { return e.h.box.Workers() }

// waitAllIdle waits until no group's worker runs, woken by each worker that
// ends.
func (e *env) waitAllIdle(t *testing.T, idle <-chan store.Folder) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for e.workersRunning() > 0 {
		select {
		case <-idle:
		case <-deadline:
			t.Fatalf("%d groups still have a worker after 10s; want none once their directories are empty", e.workersRunning())
		}
	}
}

// Idle groups hold no goroutine: a worker runs while its group has files to
// look at, ends when none are left, and a new one starts on the next event,
// also for a group removed and registered again.
func TestIdleGroupsHoldNoWorker(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 30 {
		f := store.Folder(fmt.Sprintf("idle-%02d", i))
		if _, err := e.db.Groups.Add(ctx, store.Group{Chat: chatOf(f), Folder: f, Name: string(f), Trigger: "@Andy", RequiresTrigger: true}); err != nil {
			t.Fatal(err)
		}
	}
	idle := make(chan store.Folder, 1000)
	e.h.idle = func(f store.Folder) { idle <- f }
	ch := e.run(t)
	// Every group's first worker looks at its (empty) directory and ends.
	seen := map[store.Folder]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 33 {
		select {
		case f := <-idle:
			seen[f] = true
		case <-deadline:
			t.Fatalf("the workers of %d of 33 groups ended within 10s; want all", len(seen))
		}
	}
	e.waitAllIdle(t, idle)
	if watched, _ := e.h.box.Keys(); len(watched) != 33 {
		t.Fatalf("%d groups watched; want 33", len(watched))
	}

	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"})
	writeRequest(t, e.requestsDir("idle-07"), req)
	waitHandled(t, ch, "idle-07", req.FileName())
	e.waitAllIdle(t, idle)

	// Removed while idle, then registered again: the new registration's
	// worker waits for the old one's wind-down, which must happen without a
	// worker running at the removal.
	if err := e.db.Groups.Remove(ctx, "idle-09"); err != nil {
		t.Fatal(err)
	}
	if err := e.h.SyncGroups(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Groups.Add(ctx, store.Group{Chat: chatOf("idle-09"), Folder: "idle-09", Name: "again", Trigger: "@Andy", RequiresTrigger: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.h.SyncGroups(ctx); err != nil {
		t.Fatal(err)
	}
	again := ipc.NewRequest(ipc.SendMessageArgs{Text: "back"})
	writeRequest(t, e.requestsDir("idle-09"), again)
	waitHandled(t, ch, "idle-09", again.FileName())
	if resp, ok := e.response(t, "idle-09", again.ID); !ok || !resp.OK {
		t.Fatalf("response %+v (exists %v); want ok", resp, ok)
	}
	e.waitAllIdle(t, idle)
}
