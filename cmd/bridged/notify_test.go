package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/router"
)

// sent records the notifications.
type sent struct {
	mu     sync.Mutex
	states []string
}

func (s *sent) send(state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, state)
	return nil
}

// count is how many notifications so far hold line.
func (s *sent) count(line string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.states {
		if slices.Contains(strings.Split(st, "\n"), line) {
			n++
		}
	}
	return n
}

func (s *sent) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.states)
}

// The watchdog pings at half WATCHDOG_USEC while the probes answer, not at
// all while one is wedged, again once it answers, and on through the drain
// after STOPPING=1.
func TestSystemdWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec sent
		var wedged atomic.Bool
		routerPing := func(ctx context.Context) error {
			if wedged.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
		ok := func(context.Context) error { return nil }
		status := "WhatsApp connected; 0 containers running"
		sd := &systemd{
			send:     rec.send,
			watchdog: 2 * time.Second,
			ready:    []probe{{"control socket", ok}, {"router", routerPing}},
			probes:   []probe{{"router", routerPing}, {"store", ok}},
			status:   func() string { return status },
			log:      zerolog.Nop(),
		}
		ctx, cancel := context.WithCancel(context.Background())
		sd.start(ctx)
		synctest.Wait()
		if got := rec.all(); len(got) != 1 || got[0] != "READY=1\nSTATUS="+status {
			t.Fatalf("first notifications = %q; want READY=1 with the status", got)
		}

		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if n := rec.count("WATCHDOG=1"); n != 10 {
			t.Errorf("WATCHDOG=1 in 10s with WATCHDOG_USEC=2s: %d; want 10", n)
		}

		wedged.Store(true)
		before := rec.count("WATCHDOG=1")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := rec.count("WATCHDOG=1") - before; n != 0 {
			t.Errorf("WATCHDOG=1 while the router is wedged: %d; want none", n)
		}

		wedged.Store(false)
		before = rec.count("WATCHDOG=1")
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := rec.count("WATCHDOG=1") - before; n < 2 {
			t.Errorf("WATCHDOG=1 once the router answers again: %d in 3s; want 2 or more", n)
		}

		wedged.Store(true) // the loop ends with the context
		cancel()
		synctest.Wait()
		if n := rec.count("STOPPING=1"); n != 1 {
			t.Errorf("STOPPING=1 sent %d times after the stop signal; want 1", n)
		}
		before = rec.count("WATCHDOG=1")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := rec.count("WATCHDOG=1") - before; n < 4 {
			t.Errorf("WATCHDOG=1 while draining: %d in 5s; want 4 or more", n)
		}
		sd.stop()
	})
}

// STATUS= is sent when the line changes, not on every tick.
func TestSystemdStatusOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec sent
		var mu sync.Mutex
		status := "a"
		sd := &systemd{
			send:   rec.send,
			status: func() string { mu.Lock(); defer mu.Unlock(); return status },
			log:    zerolog.Nop(),
		}
		ctx, cancel := context.WithCancel(context.Background())
		sd.start(ctx)
		time.Sleep(10 * time.Second)
		mu.Lock()
		status = "b"
		mu.Unlock()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		cancel()
		synctest.Wait()
		sd.stop()
		want := []string{"READY=1\nSTATUS=a", "STATUS=b", "STOPPING=1\nSTATUS=stopping: finishing the turns in progress"}
		if got := rec.all(); !slices.Equal(got, want) {
			t.Errorf("notifications = %q; want %q", got, want)
		}
	})
}

func TestStatusLine(t *testing.T) {
	for _, tt := range []struct {
		wa   channel.Status
		st   router.Status
		want string
	}{
		{channel.Status{State: channel.StateConnected}, router.Status{}, "WhatsApp connected; 0 containers running"},
		{channel.Status{State: channel.StateNotPaired, Detail: "run bridged login"},
			router.Status{Containers: make([]router.ContainerStatus, 1), Queue: groupqueue.Status{Waiting: []string{"a", "b"}}},
			"WhatsApp not-paired (run bridged login); 1 container running, 2 groups waiting"},
	} {
		if got := statusLine(tt.wa, tt.st); got != tt.want {
			t.Errorf("statusLine = %q; want %q", got, tt.want)
		}
	}
}
