package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// testWait bounds every wait for an event in these tests.
const testWait = 10 * time.Second

// ---- fake runtime ----

type fakeRuntime struct {
	mu       sync.Mutex
	specs    []container.Spec
	runs     map[string]*fakeRun
	stopped  []string
	history  []string // "start <group>", "stop <id>" in order
	managed  []container.Info
	started  chan *fakeRun
	onStart  func(*fakeRun) // run in its own goroutine after Start
	startErr error
	n        int
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{runs: make(map[string]*fakeRun), started: make(chan *fakeRun, 100)}
}

func (f *fakeRuntime) Start(ctx context.Context, spec container.Spec) (container.Run, error) {
	f.mu.Lock()
	if f.startErr != nil {
		err := f.startErr
		f.mu.Unlock()
		return nil, err
	}
	f.n++
	run := &fakeRun{id: fmt.Sprintf("c%d", f.n), spec: spec, events: make(chan ipc.Event, 64), exited: make(chan struct{})}
	f.specs = append(f.specs, spec)
	f.runs[run.id] = run
	f.history = append(f.history, "start "+spec.Group)
	hook := f.onStart
	f.mu.Unlock()
	f.started <- run
	if hook != nil {
		go hook(run)
	}
	return run, nil
}

func (f *fakeRuntime) Stop(ctx context.Context, id string, grace time.Duration) error {
	f.mu.Lock()
	f.stopped = append(f.stopped, id)
	f.history = append(f.history, "stop "+id)
	run := f.runs[id]
	f.mu.Unlock()
	if run != nil {
		run.exit(137)
	}
	return nil
}

func (f *fakeRuntime) ListManaged(ctx context.Context) ([]container.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]container.Info(nil), f.managed...), nil
}

func (f *fakeRuntime) starts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

func (f *fakeRuntime) stops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stopped...)
}

type fakeRun struct {
	id     string
	spec   container.Spec
	mu     sync.Mutex
	closed bool
	code   int
	events chan ipc.Event
	exited chan struct{}
}

func (r *fakeRun) ID() string               { return r.id }
func (r *fakeRun) Events() <-chan ipc.Event { return r.events }
func (r *fakeRun) Wait(ctx context.Context) (container.Exit, error) {
	select {
	case <-r.exited:
		r.mu.Lock()
		defer r.mu.Unlock()
		return container.Exit{Code: r.code}, nil
	case <-ctx.Done():
		return container.Exit{}, ctx.Err()
	}
}

// emit writes one stdout event; it does nothing once the run exited.
func (r *fakeRun) emit(ev ipc.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.events <- ev
	}
}

func (r *fakeRun) result(text string) {
	r.emit(ipc.Event{Type: ipc.EventResult, Text: text, SessionID: "sess-1", CostUSD: 0.01})
}

// exit ends the container with code (the first call wins).
func (r *fakeRun) exit(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.code = code
	close(r.events)
	close(r.exited)
}

// ---- harness ----

const (
	mainChat = store.ChatID("fake:main")
	famChat  = store.ChatID("fake:fam")
	testName = "Robo" // the assistant's name in these tests
)

type harness struct {
	t    testing.TB
	r    *Router
	db   *store.DB
	rt   *fakeRuntime
	ch   *channeltest.Fake
	cfg  Config
	home string
	stop context.CancelFunc
	done chan error
}

// newHarness builds a router over a real store with two groups: main
// (fake:main) and fam (fake:fam, trigger "@Robo" required).
func newHarness(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	db := storetest.OpenHome(t, dir)
	for _, g := range []store.Group{
		{Chat: mainChat, Name: "Main", Folder: "main", Trigger: "@" + testName, IsMain: true},
		{Chat: famChat, Name: "Family", Folder: "fam", Trigger: "@" + testName, RequiresTrigger: true},
	} {
		if _, err := db.Groups.Add(ctx, g); err != nil {
			t.Fatalf("add group: %v", err)
		}
	}
	hm, err := home.New(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		uid, gid = 61000, 61000
	}
	cfg := Config{
		AssistantName: testName,
		Timezone:      time.UTC,
		Instance:      "test-instance",
		Home:          hm,
		Container: container.SpecBuilder{Image: "bridged-agent:test", UID: uid, GID: gid,
			Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-secret-value"}},
		RetryDelays: []time.Duration{time.Millisecond},
	}
	if mod != nil {
		mod(&cfg)
	}
	h := &harness{t: t, db: db, rt: newFakeRuntime(), ch: channeltest.New("fake"), cfg: cfg, home: dir}
	h.r, err = New(cfg, Deps{Store: db, Runtime: h.rt, Channels: []channel.Channel{h.ch}, Log: testLogger(t), Ingest: newIngest(t, db, h.ch, cfg)})
	if err != nil {
		t.Fatalf("new router: %v", err)
	}
	h.r.out = h.r.newSender(5 * time.Millisecond)
	return h
}

// newIngest is the ingest the daemon builds before the router, over db
// and the one channel ch.
func newIngest(t testing.TB, db *store.DB, ch channel.Channel, cfg Config) *ingest.Ingest {
	t.Helper()
	late := cfg.LateWindow
	if late <= 0 {
		late = DefaultLateWindow
	}
	in, err := ingest.New(ingest.Config{DB: db, LateWindow: late, Log: testLogger(t), ChannelOf: func(chat string) string {
		if ch.Owns(chat) {
			return ch.Name()
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// testLogger logs to the test at debug level when -v is given.
func testLogger(t testing.TB) zerolog.Logger {
	if !testing.Verbose() {
		return zerolog.New(io.Discard)
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.r.Run(ctx) }()
	h.t.Cleanup(h.shutdown)
}

// shutdown stops the router and waits for Run to return.
func (h *harness) shutdown() {
	if h.stop == nil {
		return
	}
	h.stop()
	h.stop = nil
	// Containers still running end when stopped.
	h.rt.mu.Lock()
	for _, run := range h.rt.runs {
		go run.exit(0)
	}
	h.rt.mu.Unlock()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("router Run: got %v; want nil", err)
		}
	case <-time.After(testWait):
		h.t.Errorf("router did not stop within %s", testWait)
	}
}

// post delivers a message from Alice through Inbound and returns its id.
func (h *harness) post(chat store.ChatID, text string) store.MessageID {
	h.t.Helper()
	id, err := h.r.in.Inbound(context.Background(), channel.Message{
		Chat: string(chat), ExternalID: uuid.NewString(), Sender: "alice@x", SenderName: "Alice", Text: text, SentAt: time.Now(),
	})
	if err != nil {
		h.t.Fatalf("inbound: %v", err)
	}
	if id == 0 {
		h.t.Fatalf("message %q was not stored", text)
	}
	return id
}

func (h *harness) nextRun() *fakeRun {
	h.t.Helper()
	select {
	case run := <-h.rt.started:
		return run
	case <-time.After(testWait):
		h.t.Fatalf("no container started within %s", testWait)
		return nil
	}
}

func (h *harness) nextSend() channel.Outgoing {
	h.t.Helper()
	select {
	case m := <-h.ch.Sends():
		return m
	case <-time.After(testWait):
		h.t.Fatalf("nothing sent within %s (sent so far: %q)", testWait, h.ch.SentTexts())
		return channel.Outgoing{}
	}
}

func (h *harness) cursor(folder store.Folder) store.MessageID {
	h.t.Helper()
	c, err := h.db.Sessions.Cursor(context.Background(), folder)
	if err != nil {
		h.t.Fatalf("get cursor: %v", err)
	}
	return c
}

func (h *harness) inputDir(folder string) string {
	return filepath.Join(h.home, "data", "ipc", folder, ipc.InputDir)
}

// waitIdle waits until the group has no run, nothing pending and no retry
// in progress, and returns its queue status (zero if the queue forgot it).
func (h *harness) waitIdle(folder string) groupqueue.GroupStatus {
	h.t.Helper()
	var last groupqueue.GroupStatus
	pollUntil(h.t, func() bool {
		last = groupqueue.GroupStatus{}
		for _, g := range h.r.Status().Queue.Groups {
			if g.Group == folder {
				last = g
			}
		}
		return last.Run == "" && !last.PendingMessages && last.NextRetry.IsZero() && len(last.PendingTasks) == 0
	}, "group %s idle", folder)
	return last
}

// pollUntil checks cond with a short tick until it holds or testWait passes.
// Only for state with no event to wait on: the queue's status and the rows
// of the store change inside the router, which reports neither. Files are
// awaited with waitDir.
func pollUntil(t testing.TB, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for "+what, args...)
		}
		time.Sleep(time.Millisecond) // polling tick, not a wait for an event
	}
}

// waitDir waits, on file system events, until cond holds for dir or testWait
// passes.
func waitDir(t testing.TB, dir string, cond func() bool, what string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	if err := ipctest.WaitFor(ctx, dir, cond); err != nil {
		t.Fatalf("waiting for "+what+": %v", append(args, err)...)
	}
}

// waitFile waits for a file to exist and returns when it appeared.
func waitFile(t *testing.T, path string) time.Time {
	t.Helper()
	waitDir(t, filepath.Dir(path), func() bool { _, err := os.Stat(path); return err == nil }, "file %s", path)
	return time.Now()
}

func jsonFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := ipc.List(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".json") {
			out = append(out, n)
		}
	}
	return out
}

var errTransient = errors.New("network hiccup")

// advance moves a synctest bubble's fake clock on by d once every goroutine
// of the bubble is blocked, and lets the router settle.
func advance(d time.Duration) {
	synctest.Wait()
	time.Sleep(d)
	synctest.Wait()
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// settledInputs is waitInputs inside a synctest bubble: once the router has
// settled, dir must hold at least n input files.
func settledInputs(t *testing.T, dir string, n int) []string {
	t.Helper()
	synctest.Wait()
	names := jsonFiles(t, dir)
	if len(names) < n {
		t.Fatalf("input files in %s: got %q; want at least %d", dir, names, n)
	}
	return names
}
