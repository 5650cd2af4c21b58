package control

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store/storetest"
)

// A client that has connected but not sent its request when the daemon
// stops is not a request in flight: the stop neither waits the grace for
// it nor fails (the daemon would exit 1 on a clean SIGTERM).
func TestStopWithAConnectionThatSentNothing(t *testing.T) {
	db := storetest.Open(t)
	srv, err := Listen(Options{Socket: filepath.Join(shortDir(t), "bridged.sock"), Admin: &Admin{DB: db}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	quiet, err := net.Dial("unix", srv.opts.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	// The socket accepts in order: once a later client is answered, the
	// quiet one was accepted before it.
	hctx, hcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer hcancel()
	if err := NewClient(srv.opts.Socket).Health(hctx); err != nil {
		t.Fatal(err)
	}

	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v; want a clean stop", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
	}
	if took := time.Since(start); took >= shutdownGrace {
		t.Errorf("the stop took %v; it waited the grace (%v) for a connection with no request", took, shutdownGrace)
	}
	_ = quiet.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := quiet.Read(make([]byte, 1)); err == nil {
		t.Errorf("the quiet connection is still open (read %d bytes)", n)
	}
}
