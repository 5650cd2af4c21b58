package container

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// quietRuntime starts one container that prints nothing and ends when it is
// stopped.
type quietRuntime struct {
	once    sync.Once
	events  chan ipc.Event
	stopped chan struct{}
}

func newQuietRuntime() *quietRuntime {
	return &quietRuntime{events: make(chan ipc.Event), stopped: make(chan struct{})}
}

func (r *quietRuntime) Start(ctx context.Context, spec Spec) (Run, error) { return quietRun{r}, nil }
func (r *quietRuntime) Stop(ctx context.Context, id string, grace time.Duration) error {
	r.once.Do(func() { close(r.stopped); close(r.events) })
	return nil
}
func (r *quietRuntime) ListManaged(ctx context.Context) ([]Info, error) { return nil, nil }

type quietRun struct{ r *quietRuntime }

func (quietRun) ID() string                 { return "q" }
func (q quietRun) Events() <-chan ipc.Event { return q.r.events }
func (q quietRun) Wait(ctx context.Context) (Exit, error) {
	<-q.r.stopped
	return Exit{Code: 137}, nil
}

// A held turn is not stopped by the hard timeout, however often it fires;
// once released, the timeout stops the container as before.
func TestSuperviseHeldTurnOutlivesTheTimeout(t *testing.T) {
	rt := newQuietRuntime()
	var held atomic.Bool
	held.Store(true)
	asked := make(chan struct{}, 16)
	kick := make(chan struct{}, 1)
	done := make(chan Ended, 1)
	go func() {
		done <- Supervise(context.Background(), rt, Spec{Name: "bridged-fam", Group: "fam"}, Watch{
			Log: zerolog.Nop(), Timeout: 300 * time.Millisecond, StartTimeout: time.Hour, Kick: kick,
			Held: func() bool {
				select {
				case asked <- struct{}{}:
				default:
				}
				return held.Load()
			},
		})
	}()
	rt.events <- ipc.Event{Type: ipc.EventSession, SessionID: "s"} // the agent began its turn
	deadline := time.After(30 * time.Second)
	for range 3 {
		select {
		case <-asked:
		case e := <-done:
			t.Fatalf("a held turn ended: %+v", e)
		case <-deadline:
			t.Fatal("the timeout never asked whether the turn is held")
		}
	}
	select {
	case <-rt.stopped:
		t.Fatal("a held turn's container was stopped")
	default:
	}
	held.Store(false)
	kick <- struct{}{}
	select {
	case e := <-done:
		if !e.TimedOut {
			t.Fatalf("released turn ended %+v; want a timeout", e)
		}
	case <-deadline:
		t.Fatal("a released turn was never stopped by its timeout")
	}
}
