package alerts

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
)

// conditionChannel is connected and reports the conditions a test sets.
type conditionChannel struct {
	channel.Channel
	mu    sync.Mutex
	conds []channel.Condition
}

func (c *conditionChannel) Name() string { return "whatsapp" }
func (c *conditionChannel) Status() channel.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return channel.Status{State: channel.StateConnected, Health: channel.HealthStable, Conditions: c.conds}
}
func (c *conditionChannel) set(cs ...channel.Condition) { c.mu.Lock(); c.conds = cs; c.mu.Unlock() }

// A channel's conditions (a reachout timelock, a flapping connection, a
// suspended group) are each told once while they last, also across a
// restart; a new end time is told again; one that ended is told again when
// it comes back.
func TestChannelConditionsToldOnce(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	ch := &conditionChannel{}
	cfg := Config{Channels: []channel.Channel{ch}}
	a, p := e.open(cfg)

	ends := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	lock := channel.Condition{Key: "reachout-timelock", Health: channel.HealthRestricted, Until: ends,
		Text: "WhatsApp restricts this account from messaging new contacts until 2026-11-29 10:00 UTC."}
	flap := channel.Condition{Key: "flapping", Health: channel.HealthFlapping, Text: "The WhatsApp connection keeps dropping."}

	a.check(ctx)
	wantPosts(t, p.take())
	ch.set(lock)
	a.check(ctx)
	a.check(ctx)
	wantPosts(t, p.take(), "local:main restricts this account from messaging new contacts")
	ch.set(lock, flap)
	a.check(ctx)
	a.check(ctx)
	wantPosts(t, p.take(), "local:main keeps dropping")

	// A restart while they last tells nothing again.
	a, p = e.open(cfg)
	a.check(ctx)
	wantPosts(t, p.take())

	// The timelock is extended: told again. Flapping ends, then comes back: told again.
	lock.Until = ends.Add(24 * time.Hour)
	lock.Text = "WhatsApp restricts this account from messaging new contacts until 2026-11-30 10:00 UTC."
	ch.set(lock)
	a.check(ctx)
	wantPosts(t, p.take(), "local:main until 2026-11-30")
	ch.set(lock, flap)
	a.check(ctx)
	wantPosts(t, p.take(), "local:main keeps dropping")
	ch.set()
	a.check(ctx)
	if raised := a.Raised(); len(raised) != 0 {
		t.Errorf("raised after every condition ended: %v; want none", raised)
	}
}

// A phone-offline warning an earlier bridged kept in the state file is
// dropped: the channel reports it as a condition now, told under its own
// key.
func TestLegacyWarningKeysDropped(t *testing.T) {
	e := newEnv(t, 0)
	if err := os.WriteFile(e.state, []byte(`{"raised":{"warning/whatsapp/whatsapp-phone-offline":{"raised_at":"2026-11-01T00:00:00Z"},"disk-low":{"raised_at":"2026-11-01T00:00:00Z"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := e.open(Config{})
	raised := a.Raised()
	if _, ok := raised["warning/whatsapp/whatsapp-phone-offline"]; ok || len(raised) != 1 {
		t.Errorf("raised after loading: %v; want only disk-low", raised)
	}
}
