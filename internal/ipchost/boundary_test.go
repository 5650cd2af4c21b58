package ipchost

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
	"github.com/bridged-app/bridged/internal/store"
)

// The agent owns data/ipc/<folder>/ and may plant links, fifos and huge files
// anywhere in it, or replace a whole directory (issue 9). These tests play
// that agent against the host.

func (e *env) ipcDir(f store.Folder, elems ...string) string {
	return filepath.Join(append([]string{e.home, "data", "ipc", string(f)}, elems...)...)
}

// waitFor waits, with a deadline, until cond holds, re-checking on every
// change in dir.
func waitFor(t *testing.T, dir string, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := ipctest.WaitFor(ctx, dir, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func isRealDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

// mode is what is at path (a link is not followed); 0 if nothing is.
func mode(path string) os.FileMode {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return fi.Mode()
}

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(data)
}

// outside is a directory outside the home holding what an attacker would
// like the daemon to overwrite: a database and a victim file.
func outside(t *testing.T) (dir, db, victim string) {
	t.Helper()
	dir = t.TempDir()
	db, victim = filepath.Join(dir, "bridged.db"), filepath.Join(dir, "victim.txt")
	if err := os.WriteFile(db, []byte("SQLite format 3\x00 precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, db, victim
}

// serve starts the host and waits until family's namespace is watched: a
// first request has been answered.
func (e *env) serve(t *testing.T) <-chan handledFile {
	t.Helper()
	ch := e.run(t)
	first := ipc.NewRequest(ipc.ListTasksArgs{})
	writeRequest(t, e.requestsDir("family"), first)
	waitHandled(t, ch, "family", first.FileName())
	return ch
}

// answerAfter writes a send_message request for family and waits for it to
// be handled; the response must be ok and a regular file in the real
// responses directory.
func (e *env) answerAfter(t *testing.T, ch <-chan handledFile, text string) ipc.Request {
	t.Helper()
	req := ipc.NewRequest(ipc.SendMessageArgs{Text: text})
	writeRequest(t, e.requestsDir("family"), req)
	waitHandled(t, ch, "family", req.FileName())
	if !isRealDir(e.ipcDir("family", ipc.ResponsesDir)) {
		t.Fatal("responses/ is not a real directory")
	}
	if m := mode(e.ipcDir("family", ipc.ResponsesDir, req.FileName())); !m.IsRegular() {
		t.Fatalf("responses/%s is a %v; want a regular file", req.FileName(), m)
	}
	if resp, ok := e.response(t, "family", req.ID); !ok || !resp.OK {
		t.Fatalf("response %+v (exists %v); want ok", resp, ok)
	}
	return req
}

// A link at responses/<id>.json.tmp or responses/<id>.json is never written
// through: the file it points to keeps its content and the answer lands in
// the real responses directory. (The old host wrote through the .tmp link,
// and took the link at <id>.json for an earlier answer.)
func TestResponseLinksAreNotWrittenThrough(t *testing.T) {
	for _, planted := range []string{".json.tmp", ".json"} {
		t.Run("link at responses/<id>"+planted, func(t *testing.T) {
			e := newEnv(t)
			ch := e.serve(t)
			_, _, victim := outside(t)
			req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello"})
			if err := os.Symlink(victim, e.ipcDir("family", ipc.ResponsesDir, req.ID+planted)); err != nil {
				t.Fatal(err)
			}
			writeRequest(t, e.requestsDir("family"), req)
			waitHandled(t, ch, "family", req.FileName())

			if got := readString(t, victim); got != "untouched" {
				t.Errorf("the link's target now holds %q; want it untouched", got)
			}
			if m := mode(e.ipcDir("family", ipc.ResponsesDir, req.FileName())); !m.IsRegular() {
				t.Fatalf("responses/%s is a %v; want the answer as a regular file", req.FileName(), m)
			}
			if resp, ok := e.response(t, "family", req.ID); !ok || !resp.OK {
				t.Errorf("response %+v (exists %v); want ok", resp, ok)
			}
			if n := len(e.outbox(t)); n != 1 {
				t.Errorf("%d outbox rows; want 1 (the request carried out)", n)
			}
		})
	}
}

// responses/ replaced by a link to another directory: nothing is written
// there; the directory is moved aside and recreated, the incident recorded.
func TestResponsesDirReplacedByLink(t *testing.T) {
	e := newEnv(t)
	ch := e.serve(t)
	out, db, _ := outside(t)
	resp := e.ipcDir("family", ipc.ResponsesDir)
	if err := os.RemoveAll(resp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, resp); err != nil {
		t.Fatal(err)
	}
	e.answerAfter(t, ch, "hello")

	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Errorf("the outside directory holds %v; want only bridged.db and victim.txt", names)
	}
	if got := readString(t, db); !strings.Contains(got, "precious") {
		t.Errorf("bridged.db holds %q", got)
	}
	e.wantIncident(t, "data/ipc/family/responses", "symlink")
}

func (e *env) wantIncident(t *testing.T, path, found string) {
	t.Helper()
	for _, in := range e.h.home.Incidents() {
		if in.Path == path && in.Found == found && in.Group == "family" {
			if !strings.HasPrefix(in.MovedTo, "data/ipc/family/") {
				t.Errorf("incident %+v: moved outside the group's namespace", in)
			}
			return
		}
	}
	t.Errorf("incidents %+v; want %s (a %s) recorded for family", e.h.home.Incidents(), path, found)
}

// requests/ replaced by a link to a directory holding a database and a
// well-formed request: the database stays where it is, the request is never
// carried out, and requests written afterwards to the recreated directory are
// noticed at once (the sweep is an hour). The old host moved the database
// into quarantine and sent the message.
func TestRequestsDirReplacedByLink(t *testing.T) {
	plant := func(t *testing.T, e *env) (db, req string) {
		t.Helper()
		out, db, _ := outside(t)
		pwn := ipc.NewRequest(ipc.SendMessageArgs{Text: "pwned"})
		writeRequest(t, out, pwn)
		return db, filepath.Join(out, pwn.FileName())
	}
	check := func(t *testing.T, e *env, ch <-chan handledFile, db, req string) {
		t.Helper()
		requests := e.ipcDir("family", ipc.RequestsDir)
		waitFor(t, e.ipcDir("family"), "requests/ recreated as a real directory", func() bool { return isRealDir(requests) })
		e.answerAfter(t, ch, "still served")

		if got := readString(t, db); !strings.Contains(got, "precious") {
			t.Errorf("bridged.db holds %q", got)
		}
		if !exists(req) {
			t.Error("the request in the linked directory was moved or removed")
		}
		for _, it := range e.outbox(t) {
			if it.Text == "pwned" {
				t.Error("the request in the linked directory was carried out")
			}
		}
		if exists(filepath.Join(e.home, "data", "ipc", "errors")) {
			t.Error("data/ipc/errors exists; quarantine belongs in the group's namespace")
		}
		e.wantIncident(t, "data/ipc/family/requests", "symlink")
	}

	t.Run("before the host starts", func(t *testing.T) {
		e := newEnv(t)
		db, req := plant(t, e)
		if err := os.MkdirAll(e.ipcDir("family"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Dir(db), e.ipcDir("family", ipc.RequestsDir)); err != nil {
			t.Fatal(err)
		}
		ch := e.run(t)
		check(t, e, ch, db, req)
	})

	t.Run("while the host runs", func(t *testing.T) {
		e := newEnv(t)
		ch := e.serve(t)
		db, req := plant(t, e)
		// The agent swaps its requests directory for a link in one step.
		link := e.ipcDir("family", "link")
		if err := os.Symlink(filepath.Dir(db), link); err != nil {
			t.Fatal(err)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, e.ipcDir("family", ipc.RequestsDir), unix.RENAME_EXCHANGE); err != nil {
			t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
		}
		check(t, e, ch, db, req)
	})
}

// A fifo and a 2 MB file as requests: moved to the group's own errors/,
// answered with an error where an id can be recovered, and the host keeps
// answering.
func TestFifoAndHugeRequestsQuarantined(t *testing.T) {
	e := newEnv(t)
	ch := e.serve(t)
	dir := e.requestsDir("family")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeRaw(t, dir, "huge.json", `{"id":"huge","type":"send_message","args":{"text":"`+strings.Repeat("a", 2<<20)+`"}}`)
	pending := map[string]bool{"fifo.json": true, "huge.json": true}
	deadline := time.After(15 * time.Second)
	for len(pending) > 0 {
		select {
		case f := <-ch:
			delete(pending, f.name)
		case <-deadline:
			t.Fatalf("not handled within 15s: %v", pending)
		}
	}
	e.answerAfter(t, ch, "after the garbage")

	for name, want := range map[string]func(os.FileInfo) bool{
		"fifo.json": func(fi os.FileInfo) bool { return fi.Mode()&os.ModeNamedPipe != 0 },
		"huge.json": func(fi os.FileInfo) bool { return fi.Mode().IsRegular() && fi.Size() > 2<<20 },
	} {
		if exists(filepath.Join(dir, name)) {
			t.Errorf("requests/%s still there", name)
		}
		fi, err := os.Lstat(e.ipcDir("family", ErrorsDir, name))
		if err != nil || !want(fi) {
			t.Errorf("data/ipc/family/errors/%s: %v (%v); want the file moved there", name, err, fi)
		}
	}
	for _, id := range []string{"fifo", "huge"} {
		if resp, ok := e.response(t, "family", id); !ok || resp.OK {
			t.Errorf("%s: response %+v (exists %v); want an error response", id, resp, ok)
		}
	}
	if exists(filepath.Join(e.home, "data", "ipc", "errors")) {
		t.Error("data/ipc/errors exists; quarantine belongs in the group's namespace")
	}
}

// writeFlood fills dir with n cheap, well-formed list_tasks requests.
func writeFlood(tb testing.TB, dir string, n int) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("flood-%06d", i)
		if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(`{"id":"`+id+`","type":"list_tasks","args":{}}`), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// holdsFiles reports whether dir still has an entry (without reading all of
// a huge directory).
func holdsFiles(tb testing.TB, dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && err != io.EOF {
		tb.Fatal(err)
	}
	return len(names) > 0
}

func countFiles(tb testing.TB, dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return len(entries)
}

// startHost runs e.h until the test ends, with no handled hook of its own.
func (e *env) startHost(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.h.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run returned %v; want nil after the context ends", err)
		}
	})
}

// 40,000 requests from one group do not hold up another group's request: it
// is answered while the flood is still being worked through. (The old host
// handled every group's files on one goroutine, directory after directory.)
func TestFloodDoesNotDelayOtherGroups(t *testing.T) {
	e := newEnv(t)
	flood := e.requestsDir("family")
	writeFlood(t, flood, 40000)
	started := make(chan struct{})
	var once sync.Once
	e.h.handled = func(f store.Folder, name string) {
		if f == "family" {
			once.Do(func() { close(started) })
		}
	}
	e.startHost(t)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the flood was not being handled within 30s")
	}

	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "hello from work"})
	writeRequest(t, e.requestsDir("work"), req)
	waitFor(t, e.ipcDir("work", ipc.ResponsesDir), "work's answer", func() bool {
		return exists(e.ipcDir("work", ipc.ResponsesDir, req.FileName()))
	})
	if !holdsFiles(t, flood) {
		t.Fatal("work was answered only after family's 40,000 requests; want it answered during the flood")
	}
	if resp, ok := e.response(t, "work", req.ID); !ok || !resp.OK {
		t.Errorf("work's response %+v (exists %v); want ok", resp, ok)
	}
	t.Logf("work answered with %d of family's requests still waiting", countFiles(t, flood))
}

// blockingRefresher holds every refresh until released, counting how many
// wait at once.
type blockingRefresher struct {
	release chan struct{}
	cur     atomic.Int32
	max     atomic.Int32
	full    chan struct{} // closed when MaxInFlight-1 wait at once
	once    sync.Once
}

func (r *blockingRefresher) RefreshGroups(ctx context.Context) error {
	n := r.cur.Add(1)
	defer r.cur.Add(-1)
	for {
		m := r.max.Load()
		if n <= m || r.max.CompareAndSwap(m, n) {
			break
		}
	}
	if n == MaxInFlight-1 {
		r.once.Do(func() { close(r.full) })
	}
	select {
	case <-r.release:
	case <-ctx.Done():
	}
	return nil
}

// Slow requests (list_groups refreshing names from WhatsApp) run alongside
// the group's others, at most MaxInFlight-1 at once (the worker keeps the
// last slot for the rest): a message sent meanwhile is answered without
// waiting for them. (The old host handled a group's requests one at a time.)
func TestSlowRequestsBoundedAndNotBlocking(t *testing.T) {
	e := newEnv(t)
	r := &blockingRefresher{release: make(chan struct{}), full: make(chan struct{})}
	e.h.refresh = r
	ch := e.run(t)
	dir := e.requestsDir("main")
	const slow = MaxInFlight + 36
	for range slow {
		writeRequest(t, dir, ipc.NewRequest(ipc.ListGroupsArgs{Refresh: true}))
	}
	select {
	case <-r.full:
	case <-time.After(15 * time.Second):
		close(r.release)
		t.Fatalf("%d refreshes waiting after 15s; want %d", r.cur.Load(), MaxInFlight-1)
	}
	// While they hang, a message is answered.
	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "not held up"})
	writeRequest(t, dir, req)
	waitFor(t, e.ipcDir("main", ipc.ResponsesDir), "main's message answered", func() bool {
		return exists(e.ipcDir("main", ipc.ResponsesDir, req.FileName()))
	})
	if m := r.max.Load(); m > MaxInFlight-1 {
		t.Errorf("%d refreshes at once; want at most %d", m, MaxInFlight-1)
	}
	close(r.release)
	deadline := time.After(30 * time.Second)
	for n := 0; n < slow+1; {
		select {
		case f := <-ch:
			if f.folder == "main" {
				n++
			}
		case <-deadline:
			t.Fatalf("only %d of %d requests handled within 30s", n, slow+1)
		}
	}
	if m := r.max.Load(); m > MaxInFlight-1 {
		t.Errorf("%d refreshes at once; want at most %d", m, MaxInFlight-1)
	}
	if n := e.responseCount(t, "main"); n != slow+1 {
		t.Errorf("%d responses; want %d", n, slow+1)
	}
}
