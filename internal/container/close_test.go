package container

import (
	"context"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Close ends the goroutines of the runs it started and waits for them: a
// container still running keeps neither its output reader nor its exit
// watcher alive past Close (it is left running, for the next start's
// leftover sweep).
func TestDockerCloseEndsRunGoroutines(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		other := e.open(t) // removes the container once d is closed
		spec, _ := e.echoSpec(t, image, "sleep 1h")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := d.Start(ctx, spec)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := other.Stop(ctx, run.ID(), 0); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			other.Close()
		})
		if ev, _ := nextEvent(t, run, 30*time.Second); ev.Type != ipc.EventSession {
			t.Fatalf("first event %+v; want session", ev)
		}

		closed := make(chan error, 1)
		go func() { closed <- d.Close() }()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Fatal("Close did not return within 30s")
		}
		r := run.(*dockerRun)
		for name, done := range map[string]chan struct{}{"exit watcher": r.exited, "output reader": r.output} {
			select {
			case <-done:
			default:
				t.Errorf("the run's %s still runs after Close returned", name)
			}
		}
		spec.Name = uniqueName(t)
		if late, err := d.Start(ctx, spec); err == nil {
			t.Error("Start after Close succeeded; want an error")
			_ = other.Stop(ctx, late.ID(), 0)
		}
	})
}
