package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/store"
)

// wedgingBudget wedges the router's message loop on demand: once wedged,
// Paused blocks until release is closed.
type wedgingBudget struct {
	mu       sync.Mutex
	wedged   bool
	entered  chan struct{}
	release  chan struct{}
	released sync.Once
}

// free lets the wedged loop go on.
func (b *wedgingBudget) free() { b.released.Do(func() { close(b.release) }) }

func (b *wedgingBudget) Paused(ctx context.Context, g store.Group) bool {
	b.mu.Lock()
	wedged := b.wedged
	b.mu.Unlock()
	if wedged {
		close(b.entered)
		<-b.release
	}
	return true // never start a container: this test needs none
}

func (b *wedgingBudget) Spent(context.Context, store.Group) {}

// noContainers is a runtime that never has a container.
type noContainers struct{}

func (noContainers) Start(context.Context, container.Spec) (container.Run, error) {
	return nil, os.ErrPermission
}
func (noContainers) Stop(context.Context, string, time.Duration) error { return nil }
func (noContainers) ListManaged(context.Context) ([]container.Info, error) {
	return nil, nil
}

// A fake NOTIFY_SOCKET hears READY=1 from a real router and store, then
// WATCHDOG=1 at half WATCHDOG_USEC, none while the router's message loop
// is wedged, the pings again once it is free, and STOPPING=1 at the stop.
func TestNotifySocketWatchdogFollowsTheRouter(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdnotify-") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const interval = 400 * time.Millisecond
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int(interval/time.Microsecond)))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	got := make(chan string, 1000)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:n])
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case s := <-got:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification within 10s; want %s", what)
			return ""
		}
	}

	ctx := context.Background()
	db := openDB(t, dir)
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Name: "main", Folder: "main", Trigger: "@Andy", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	budget := &wedgingBudget{entered: make(chan struct{}), release: make(chan struct{})}
	ing, err := ingest.New(ingest.Config{DB: db, LateWindow: router.DefaultLateWindow, Log: zerolog.Nop(),
		ChannelOf: func(string) string { return "local" }})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{AssistantName: "Andy", Home: hm, Container: container.SpecBuilder{UID: 1000, GID: 1000, Image: "none"}},
		router.Deps{Store: db, Runtime: noContainers{}, Channels: []channel.Channel{local.New(db, "Andy", ing.InboundSeen, zerolog.Nop())},
			Log: zerolog.Nop(), Budget: budget, Ingest: ing})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRouter := context.WithCancel(ctx)
	routerDone := make(chan struct{})
	go func() { _ = rt.Run(rctx); close(routerDone) }()
	defer func() { budget.free(); stopRouter(); <-routerDone }()

	log := zerolog.Nop()
	sd := &systemd{
		send:     sdSend,
		watchdog: sdWatchdog(log),
		ready:    []probe{{"router", rt.Ping}, {"store", db.Ping}},
		probes:   []probe{{"router", rt.Ping}, {"store", db.Ping}},
		status:   func() string { return "testing" },
		log:      log,
	}
	if sd.watchdog != interval {
		t.Fatalf("watchdog from the environment = %s; want %s", sd.watchdog, interval)
	}
	sdCtx, stop := context.WithCancel(ctx)
	sd.start(sdCtx)
	stopped := false
	defer func() {
		if !stopped {
			stop()
			sd.stop()
		}
	}()
	if s := next("READY=1"); s != "READY=1\nSTATUS=testing" {
		t.Fatalf("first notification = %q; want READY=1 with the status", s)
	}
	start := time.Now()
	for range 3 {
		if s := next("WATCHDOG=1"); s != "WATCHDOG=1" {
			t.Fatalf("notification = %q; want WATCHDOG=1", s)
		}
	}
	if el := time.Since(start); el < interval {
		t.Errorf("3 pings in %s; want them at half of WATCHDOG_USEC=%s, not faster", el, interval)
	}

	// Wedge the message loop: the next message makes it wait in Paused.
	budget.mu.Lock()
	budget.wedged = true
	budget.mu.Unlock()
	if _, err := ing.Inbound(ctx, channel.Message{Chat: "local:main", ExternalID: "m1", Sender: "me", Text: "hi", SentAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	<-budget.entered
	// A probe begun before the wedge may still ping once; then silence.
	quiet := time.After(interval)
	for drained := false; !drained; {
		select {
		case <-got:
		case <-quiet:
			drained = true
		}
	}
	window := time.After(4 * interval)
	for done := false; !done; {
		select {
		case s := <-got:
			if strings.Contains(s, "WATCHDOG=1") {
				t.Fatalf("WATCHDOG=1 while the router is wedged (%q); want none", s)
			}
		case <-window:
			done = true
		}
	}

	budget.free()
	for s := next("WATCHDOG=1 once the router is free"); !strings.Contains(s, "WATCHDOG=1"); s = next("WATCHDOG=1") {
	}
	stop()
	for s := next("STOPPING=1"); !strings.Contains(s, "STOPPING=1"); s = next("STOPPING=1") {
	}
	sd.stop()
	stopped = true
}
