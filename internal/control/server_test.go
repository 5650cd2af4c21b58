package control

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
	"github.com/bridged-app/bridged/internal/turns"
)

// shortDir returns a temporary directory with a path short enough for a unix
// socket.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func openStore(t *testing.T) *store.DB {
	t.Helper()
	return storetest.Open(t)
}

// waitingLocal is the real local channel that also tells the test when a
// long-poll has registered as a waiter.
type waitingLocal struct {
	*local.Channel
	waiting chan struct{}
}

func (w *waitingLocal) Wait(ctx context.Context) <-chan struct{} {
	ch := w.Channel.Wait(ctx)
	select {
	case w.waiting <- struct{}{}:
	default:
	}
	return ch
}

type countSync struct {
	n atomic.Int32
	// applies is what ApplySettings answers (empty: AppliesNext).
	applies atomic.Value
	// applied are the folders ApplySettings was asked for, in order.
	mu      sync.Mutex
	applied []string
}

func (c *countSync) SyncGroups(context.Context) error { c.n.Add(1); return nil }

func (c *countSync) ApplySettings(_ context.Context, folder string) (string, error) {
	c.mu.Lock()
	c.applied = append(c.applied, folder)
	c.mu.Unlock()
	if a, ok := c.applies.Load().(string); ok {
		return a, nil
	}
	return AppliesNext, nil
}

type countWake struct{ n atomic.Int32 }

func (c *countWake) Wake() { c.n.Add(1) }

type fakeLive struct{ live Live }

func (f fakeLive) Live() Live { return f.live }

// metricChannel is a fake channel that reports its own state gauge, as
// WhatsApp does.
type metricChannel struct{ *channeltest.Fake }

func (metricChannel) StateMetric() (string, int) { return "bridged_fake_state", 5 }

// newMetricChannel returns a metricChannel named name in state.
func newMetricChannel(name string, state channel.ConnState) metricChannel {
	f := channeltest.New(name)
	f.SetStatus(state, "")
	return metricChannel{f}
}

type harness struct {
	home   *home.Home
	posted chan channel.Message // every message posted, as the router got it
	db     *store.DB
	local  *waitingLocal
	// inbound is what the local channel stores posts with (a
	// local.Inbound); a test swaps it to make posting fail.
	inbound *atomic.Value
	client  *Client
	socket  string
	sync    *countSync
	wake    *countWake
	turns   *turns.Hub
	stop    func()
	done    chan error
}

// storeInbound stores a message the way the router does.
func storeInbound(db *store.DB) local.Inbound {
	return func(ctx context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		id, _, err := db.Messages.Insert(ctx, store.Message{Chat: store.ChatID(m.Chat), ExternalID: m.ExternalID,
			Sender: m.Sender, SenderName: m.SenderName, Text: m.Text, SentAt: m.SentAt})
		return id, err
	}
}

func start(t *testing.T, live Live) *harness {
	t.Helper()
	return startWith(t, live, nil)
}

// startWith is start with the options changed by opt (nil: none).
func startWith(t *testing.T, live Live, opt func(*Options)) *harness {
	t.Helper()
	db := openStore(t)
	hm, err := home.New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	uploads := hm.Uploads()
	posted := make(chan channel.Message, 100)
	inbound := &atomic.Value{}
	inbound.Store(storeInbound(db))
	loc := &waitingLocal{Channel: local.New(db, "Andy", func(ctx context.Context, seen ingest.Changed, m channel.Message) (store.MessageID, error) {
		id, err := inbound.Load().(local.Inbound)(ctx, seen, m)
		if err == nil {
			posted <- m
		}
		return id, err
	}, zerolog.Nop()), waiting: make(chan struct{}, 1)}
	h := &harness{home: hm, posted: posted, db: db, local: loc, inbound: inbound, sync: &countSync{}, wake: &countWake{}, turns: turns.New(nil, nil), socket: filepath.Join(shortDir(t), "bridged.sock")}
	opts := Options{
		Socket:    h.socket,
		Admin:     &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC},
		Local:     loc,
		Turns:     h.turns,
		Status:    fakeLive{live},
		Channels:  []channel.Channel{loc.Channel, newMetricChannel("whatsapp", channel.StateNotPaired)},
		Groups:    h.sync,
		Tasks:     h.wake,
		Version:   "test",
		Log:       zerolog.Nop(),
		Uploads:   &uploads,
		MaxUpload: testMaxUpload,
	}
	if opt != nil {
		opt(&opts)
	}
	srv, err := Listen(opts)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.done = make(chan error, 1)
	go func() { h.done <- srv.Run(ctx) }()
	// Stopped once, by the test or else at its end.
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-h.done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	h.client = NewClient(h.socket)
	return h
}

func (h *harness) addMain(t *testing.T) {
	t.Helper()
	if _, err := h.client.AddGroup(context.Background(), GroupAdd{Chat: "local:main", Name: "main", IsMain: true}); err != nil {
		t.Fatalf("AddGroup: %v", err)
	}
}

func TestSocketLifecycle(t *testing.T) {
	h := start(t, Live{})
	fi, err := os.Stat(h.socket)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("got socket mode %o; want 600", got)
	}
	if err := h.client.Health(context.Background()); err != nil {
		t.Fatalf("Health: %v", err)
	}
	_, err = Listen(Options{Socket: h.socket, Admin: &Admin{DB: h.db}, Log: zerolog.Nop()})
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Listen got %v; want ErrAlreadyRunning", err)
	}
	if err := h.client.Health(context.Background()); err != nil {
		t.Errorf("first server stopped answering after a refused second one: %v", err)
	}
	h.stop()
	if _, err := os.Stat(h.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after Run ended: %v", err)
	}
	if err := h.client.Health(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Health after stop got %v; want ErrNotRunning", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	sock := filepath.Join(shortDir(t), "bridged.sock")
	// A daemon killed with -9 leaves its socket file behind.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	if err := NewClient(sock).Health(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Health on a stale socket got %v; want ErrNotRunning", err)
	}
	srv, err := Listen(Options{Socket: sock, Admin: &Admin{DB: openStore(t)}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	if err := NewClient(sock).Health(context.Background()); err != nil {
		t.Errorf("Health: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	p := filepath.Join(shortDir(t), "bridged.sock")
	if err := os.WriteFile(p, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(Options{Socket: p, Admin: &Admin{DB: openStore(t)}, Log: zerolog.Nop()}); err == nil {
		t.Fatal("Listen over a regular file succeeded; want an error")
	}
	if b, _ := os.ReadFile(p); string(b) != "keep me" {
		t.Error("Listen clobbered a regular file")
	}
}

func TestLongPollWakesOnReply(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	id, err := h.client.PostMessage(ctx, "local:main", "alice", "hello")
	if err != nil {
		t.Fatalf("PostMessage: %v", err)
	}
	type result struct {
		msgs []ChatMessage
		err  error
	}
	res := make(chan result, 1)
	drain(h.local.waiting)
	go func() {
		m, err := h.client.Messages(ctx, "local:main", id, 30*time.Second)
		res <- result{m, err}
	}()
	select {
	case <-h.local.waiting:
	case r := <-res:
		t.Fatalf("long-poll answered before any reply: %+v, %v", r.msgs, r.err)
	}
	if _, err := h.local.Send(ctx, channel.Outgoing{Chat: "local:main", Text: "hi alice", ID: "3EB0AAAA"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatalf("Messages: %v", r.err)
		}
		if len(r.msgs) != 1 || r.msgs[0].Direction != Out || r.msgs[0].Text != "hi alice" || r.msgs[0].Sender != "Andy" {
			t.Fatalf("got %+v; want one outbound %q from Andy", r.msgs, "hi alice")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long-poll did not answer within 10s of the reply")
	}
}

func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func TestLongPollTimesOutEmpty(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	id, err := h.client.PostMessage(ctx, "local:main", "alice", "hello")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	msgs, err := h.client.Messages(ctx, "local:main", id, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	if len(msgs) != 0 {
		t.Errorf("got %d messages; want none", len(msgs))
	}
	if d := time.Since(began); d < 200*time.Millisecond {
		t.Errorf("long-poll answered after %s; want it to wait 200ms", d)
	}
	// Without wait it answers at once with what there is, both directions.
	all, err := h.client.Messages(ctx, "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].ID != id || all[0].Direction != In || all[0].Sender != "alice" {
		t.Errorf("got %+v; want alice's message %d inbound", all, id)
	}
}

func TestLongPollEndsOnShutdown(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	res := make(chan error, 1)
	drain(h.local.waiting)
	go func() {
		_, err := h.client.Messages(context.Background(), "local:main", 0, 60*time.Second)
		res <- err
	}()
	<-h.local.waiting
	stopped := make(chan struct{})
	go func() { h.stop(); close(stopped) }()
	select {
	case <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("long-poll still waiting 10s after shutdown began")
	}
	<-stopped
}

func TestChatErrors(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	tests := []struct {
		name string
		chat string
		text string
		want error
	}{
		{"whatsapp chat", "123@g.us", "hi", ErrInvalid},
		{"unregistered", "local:nobody", "hi", ErrNotFound},
		{"blank", "local:main", "   ", ErrInvalid},
		{"huge", "local:main", strings.Repeat("x", maxText+1), ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client.PostMessage(ctx, tt.chat, "alice", tt.text)
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
		})
	}
	if _, err := h.client.Messages(ctx, "local:nobody", 0, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Messages of an unregistered chat got %v; want ErrNotFound", err)
	}
	var apiErr *APIError
	if _, err := h.client.Messages(ctx, "local:main", 0, -time.Second); err != nil {
		t.Errorf("negative wait from the client should be left out, got %v", err)
	}
	if err := h.client.do(ctx, "GET", "/v1/chats/local:main/messages?wait=soon", nil, nil); !errors.As(err, &apiErr) || apiErr.Code != 400 {
		t.Errorf("wait=soon got %v; want a 400", err)
	}
	if err := h.client.do(ctx, "POST", "/v1/groups", map[string]any{"chat": "local:x", "name": "x", "colour": "red"}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown field got %v; want ErrInvalid", err)
	}
	if err := h.client.do(ctx, "GET", "/v1/nothing", nil, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown endpoint got %v; want ErrNotFound", err)
	}
}

func TestGroupsThroughAPI(t *testing.T) {
	h := start(t, Live{})
	ctx := context.Background()
	g, err := h.client.AddGroup(ctx, GroupAdd{Chat: "local:main", Name: "main", IsMain: true})
	if err != nil {
		t.Fatalf("AddGroup: %v", err)
	}
	if g.Folder != "main" || g.Trigger != "@Andy" || !g.RequiresTrigger || !g.IsMain {
		t.Errorf("got %+v; want folder main, trigger @Andy, requires trigger, main", g)
	}
	if got := h.sync.n.Load(); got != 1 {
		t.Errorf("got %d group syncs after add; want 1", got)
	}
	no := false
	fam, err := h.client.AddGroup(ctx, GroupAdd{Chat: "120363@g.us", Name: "The Family!", Trigger: "Bob", RequiresTrigger: &no})
	if err != nil {
		t.Fatalf("AddGroup family: %v", err)
	}
	if fam.Folder != "the-family" || fam.Trigger != "@Bob" || fam.RequiresTrigger {
		t.Errorf("got %+v; want folder the-family, trigger @Bob, no trigger required", fam)
	}
	errs := []struct {
		name string
		req  GroupAdd
		want error
	}{
		{"second main", GroupAdd{Chat: "local:other", Name: "other", IsMain: true}, ErrConflict},
		{"chat taken", GroupAdd{Chat: "local:main", Name: "again"}, ErrConflict},
		{"folder taken", GroupAdd{Chat: "local:x", Name: "main"}, ErrConflict},
		{"hostile folder", GroupAdd{Chat: "local:x", Name: "x", Folder: "../x"}, ErrInvalid},
		{"reserved folder", GroupAdd{Chat: "local:x", Name: "global"}, ErrInvalid},
		{"no chat", GroupAdd{Name: "x"}, ErrInvalid},
		{"bad chat", GroupAdd{Chat: "hello", Name: "x"}, ErrInvalid},
		{"no name", GroupAdd{Chat: "local:x"}, ErrInvalid},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.client.AddGroup(ctx, tt.req); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
		})
	}
	model, timeout := "opus", "45m"
	up, err := h.client.UpdateGroup(ctx, "the-family", GroupPatch{Model: &model, Timeout: &timeout})
	if err != nil {
		t.Fatalf("UpdateGroup: %v", err)
	}
	if up.Model != "opus" || up.Timeout != "45m0s" || up.Trigger != "@Bob" {
		t.Errorf("got %+v; want model opus, timeout 45m0s, trigger kept", up)
	}
	bad := "soon"
	if _, err := h.client.UpdateGroup(ctx, "the-family", GroupPatch{Timeout: &bad}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad timeout got %v; want ErrInvalid", err)
	}
	if _, err := h.client.UpdateGroup(ctx, "nobody", GroupPatch{Model: &model}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of unknown group got %v; want ErrNotFound", err)
	}
	if err := h.client.RemoveGroup(ctx, "the-family"); err != nil {
		t.Fatalf("RemoveGroup: %v", err)
	}
	if err := h.client.RemoveGroup(ctx, "the-family"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second remove got %v; want ErrNotFound", err)
	}
	gs, err := h.client.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].Folder != "main" {
		t.Errorf("got groups %+v; want only main", gs)
	}
	if got := h.sync.n.Load(); got != 4 {
		t.Errorf("got %d group syncs; want 4 (two adds, an update, a remove)", got)
	}
	if got := h.wake.n.Load(); got != 1 {
		t.Errorf("got %d scheduler wakes after removing a group; want 1", got)
	}
}
