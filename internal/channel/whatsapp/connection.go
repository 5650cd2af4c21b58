package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

// Reconnection timing.
const (
	// MinReconnectDelay is the wait before the first reconnection attempt;
	// each failure doubles it up to MaxReconnectDelay.
	MinReconnectDelay = time.Second
	// MaxReconnectDelay caps the reconnection backoff.
	MaxReconnectDelay = 2 * time.Minute
	// keepAliveMaxFail is how long keepalives may fail before the connection
	// is dropped and reopened (whatsmeow's own value).
	keepAliveMaxFail = 3 * time.Minute
	// banRetryFallback is used when a temporary ban gives no expiry.
	banRetryFallback = 30 * time.Minute
	// groupSyncInterval is how often group names are refreshed.
	groupSyncInterval = 24 * time.Hour
	// groupSyncTimeout bounds one group refresh.
	groupSyncTimeout = 2 * time.Minute
)

// What the owner should do, per state.
const (
	detailNotPaired    = "run `bridged login` to pair"
	detailReconnecting = "connection to WhatsApp lost; reconnecting automatically"
	detailKeepAlive    = "WhatsApp is not answering keepalives; waiting for the connection to recover"
	detailReplaced     = "another client connected with this session: stop the other bridged (only one may use store/whatsapp.db), then restart bridged"
	detailOutdated     = "WhatsApp rejected this client as outdated (405): update bridged, then restart it"
)

// backoff is the delay before reconnection attempt n (0-based).
func backoff(n int) time.Duration {
	d := MinReconnectDelay
	for i := 0; i < n && d < MaxReconnectDelay; i++ {
		d *= 2
	}
	return min(d, MaxReconnectDelay)
}

// jobKind is what the supervisor does next.
type jobKind int

const (
	jobNone      jobKind = iota
	jobStart             // fetch the web version, then connect
	jobReconnect         // connect
	jobReset             // drop the (dead) connection, then connect
	jobOutdated          // fetch the web version; connect if it changed
)

type job struct {
	kind jobKind
	at   time.Time
}

// connection owns the connection: its state and what the owner should do
// about it, and the supervisor that reconnects with a capped backoff (the
// web version with it).
type connection struct {
	*core
	ver   *versioner
	cond  *conditions     // a live connection's drop counts towards flapping
	fresh []chan struct{} // signalled on every new session

	mu          sync.Mutex
	status      channel.Status
	changed     chan struct{} // closed and replaced on every status change
	started     bool
	attempts    int // failed connection attempts since the last success
	job         job // the supervisor's next job
	outdatedTry bool

	wake chan struct{} // supervisor: job changed
}

func newConnection(co *core, ver *versioner, cond *conditions) *connection {
	return &connection{core: co, ver: ver, cond: cond, changed: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// init sets the first state: disconnected, or not paired.
func (c *connection) init() {
	c.status = channel.Status{State: channel.StateDisconnected, Since: c.now()}
	if !c.wa.Paired() {
		c.setState(channel.StateNotPaired, detailNotPaired)
	}
}

// begin reports whether the supervisor is to start: once, and not after
// Close.
func (c *connection) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.base.Err() != nil {
		return false
	}
	c.started = true
	return true
}

// current is the connection's status, without health.
func (c *connection) current() channel.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// state is the connection state.
func (c *connection) state() channel.ConnState { return c.current().State }

// settled returns nil once connected or once the state needs the owner, or
// ctx.Err() when ctx ends first.
func (c *connection) settled(ctx context.Context) error {
	for {
		c.mu.Lock()
		st, changed := c.status.State, c.changed
		c.mu.Unlock()
		if st == channel.StateConnected || needsOwner(st) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitConnected returns once the client is connected, or ctx's error.
func (c *connection) waitConnected(ctx context.Context) error {
	for {
		c.mu.Lock()
		state, changed := c.status.State, c.changed
		c.mu.Unlock()
		if state == channel.StateConnected {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w (%s)", errNotConnected, state)
		}
	}
}

// needsOwner reports states that only the owner can end.
func needsOwner(s channel.ConnState) bool {
	switch s {
	case channel.StateNotPaired, channel.StateLoggedOut, channel.StateReplaced, channel.StateBanned, channel.StateOutdated:
		return true
	}
	return false
}

// setState records a new status, logging it once with what to do.
func (c *connection) setState(state channel.ConnState, detail string) {
	c.mu.Lock()
	if c.status.State == state && c.status.Detail == detail {
		c.mu.Unlock()
		return
	}
	c.status = channel.Status{State: state, Detail: detail, Since: c.now()}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()

	ev := c.log.Info()
	switch {
	case state == channel.StateReconnecting || state == channel.StateDisconnected || state == channel.StateNotPaired:
		ev = c.log.Warn()
	case needsOwner(state):
		ev = c.log.Error()
	}
	if state == channel.StateNotPaired {
		ev.Str("state", string(state)).Msg("WhatsApp is not paired; run `bridged login` to pair (local chats keep working)")
		return
	}
	ev.Str("state", string(state)).Str("detail", detail).Msg("whatsapp connection state changed")
}

// transition is what a connection event does to the channel.
type transition struct {
	state  channel.ConnState
	detail string
	job    jobKind       // jobNone: no reconnection
	delay  time.Duration // for jobReconnect: fixed delay instead of the backoff
	fresh  bool          // a new session: send presence and sync group names
}

// connTransition maps a whatsmeow connection event to the resulting state
// and reconnection decision. ok is false for events that do not affect the
// connection.
func connTransition(evt any, now time.Time) (t transition, ok bool) {
	switch e := evt.(type) {
	case *events.Connected:
		return transition{state: channel.StateConnected, fresh: true}, true
	case *events.KeepAliveRestored:
		return transition{state: channel.StateConnected}, true
	case *events.Disconnected:
		return transition{state: channel.StateReconnecting, detail: detailReconnecting, job: jobReconnect}, true
	case *events.KeepAliveTimeout:
		t = transition{state: channel.StateReconnecting, detail: detailKeepAlive}
		if !e.LastSuccess.IsZero() && now.Sub(e.LastSuccess) > keepAliveMaxFail {
			t.detail = detailReconnecting
			t.job = jobReset
		}
		return t, true
	case *events.LoggedOut:
		return transition{state: channel.StateLoggedOut, detail: fmt.Sprintf(
			"WhatsApp logged this device out (%s): run `bridged login` to pair again, then restart bridged", e.Reason)}, true
	case *events.StreamReplaced:
		return transition{state: channel.StateReplaced, detail: detailReplaced}, true
	case *events.TemporaryBan:
		delay := e.Expire
		if delay <= 0 {
			delay = banRetryFallback
		}
		return transition{
			state: channel.StateBanned,
			detail: fmt.Sprintf("WhatsApp temporarily banned this account (%s)%s; bridged reconnects in %s",
				e.Code, banUntil(e, now), delay.Round(time.Second)),
			job:   jobReconnect,
			delay: delay,
		}, true
	case *events.ClientOutdated:
		return transition{state: channel.StateOutdated, detail: detailOutdated, job: jobOutdated}, true
	case *events.ConnectFailure:
		return transition{state: channel.StateDisconnected, detail: fmt.Sprintf(
			"WhatsApp refused the connection (%s); retrying", e.Reason), job: jobReconnect}, true
	case *events.CATRefreshError:
		return transition{state: channel.StateDisconnected, detail: "WhatsApp refused the connection; retrying", job: jobReconnect}, true
	}
	return transition{}, false
}

// handleEvent applies a connection event. Events whatsmeow dispatches
// asynchronously can arrive late, so a stale keepalive or disconnect event
// never overrides a state only the owner (or a ban's expiry) can end.
func (c *connection) handleEvent(evt any) {
	t, ok := connTransition(evt, c.now())
	if !ok {
		return
	}
	cur := c.current()
	switch evt.(type) {
	case *events.Disconnected, *events.ConnectFailure, *events.CATRefreshError:
		if needsOwner(cur.State) {
			c.log.Debug().Str("state", string(cur.State)).Type("event", evt).Msg("ignoring connection event")
			return
		}
	case *events.KeepAliveTimeout, *events.KeepAliveRestored:
		if cur.State != channel.StateConnected && cur.Detail != detailKeepAlive {
			return
		}
	}
	if cur.State == channel.StateConnected && t.state != channel.StateConnected {
		c.cond.noteDrop(c.now())
	}
	c.applyTransition(t)
}

// applyTransition records t and schedules its job.
func (c *connection) applyTransition(t transition) {
	switch t.state {
	case channel.StateConnected:
		c.mu.Lock()
		c.attempts = 0
		c.outdatedTry = false
		c.mu.Unlock()
		c.setState(t.state, t.detail)
		if t.fresh {
			for _, ch := range c.fresh {
				signal(ch)
			}
		}
		return
	case channel.StateOutdated:
		c.mu.Lock()
		tried := c.outdatedTry
		c.outdatedTry = true
		c.mu.Unlock()
		if tried {
			t.job = jobNone // one refresh per outage; after that the owner must update
		}
	}
	c.setState(t.state, t.detail)
	switch t.job {
	case jobNone:
		if needsOwner(t.state) {
			c.schedule(jobNone, 0) // drop any pending attempt
		}
	case jobReconnect:
		delay := t.delay
		if delay == 0 {
			c.mu.Lock()
			delay = backoff(c.attempts)
			c.attempts++
			c.mu.Unlock()
		}
		c.schedule(jobReconnect, delay)
	default:
		c.schedule(t.job, 0)
	}
}

// schedule replaces the supervisor's next job.
func (c *connection) schedule(kind jobKind, delay time.Duration) {
	c.mu.Lock()
	c.job = job{kind: kind, at: c.now().Add(delay)}
	c.mu.Unlock()
	signal(c.wake)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// supervise runs connection jobs until ctx ends.
func (c *connection) supervise(ctx context.Context) {
	for {
		c.mu.Lock()
		next := c.job
		c.mu.Unlock()
		var due <-chan time.Time
		var timer *time.Timer
		if next.kind != jobNone {
			timer = time.NewTimer(max(0, next.at.Sub(c.now())))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-c.wake:
			if timer != nil {
				timer.Stop()
			}
			continue
		case <-due:
		}
		c.mu.Lock()
		if c.job != next {
			c.mu.Unlock()
			continue
		}
		c.job = job{}
		c.mu.Unlock()
		c.runJob(ctx, next.kind)
	}
}

func (c *connection) runJob(ctx context.Context, kind jobKind) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Any("panic", r).Msg("whatsapp connection job panicked; retrying")
			c.schedule(jobReconnect, MaxReconnectDelay)
		}
	}()
	switch kind {
	case jobStart:
		if c.ver != nil {
			c.ver.refresh(ctx)
		}
	case jobReset:
		c.wa.Disconnect()
	case jobOutdated:
		if c.ver == nil || !c.ver.refresh(ctx) {
			c.log.Error().Msg("no newer WhatsApp web version is published; update bridged")
			return
		}
	}
	if st := c.state(); st == channel.StateBanned || st == channel.StateOutdated {
		c.setState(channel.StateReconnecting, detailReconnecting)
	}
	c.connectOnce(ctx)
}

// connectOnce makes one connection attempt and schedules the next one if it
// fails.
func (c *connection) connectOnce(ctx context.Context) {
	if !c.wa.Paired() {
		c.setState(channel.StateLoggedOut, "this device is no longer paired: run `bridged login` to pair again, then restart bridged")
		return
	}
	err := c.wa.ConnectContext(ctx)
	switch {
	case err == nil, errors.Is(err, whatsmeow.ErrAlreadyConnected):
		return // the outcome arrives as an event
	case ctx.Err() != nil:
		return
	case errors.Is(err, store.ErrDeviceDeleted):
		c.setState(channel.StateLoggedOut, "this device is no longer paired: run `bridged login` to pair again, then restart bridged")
		return
	}
	c.mu.Lock()
	delay := backoff(c.attempts)
	c.attempts++
	attempt := c.attempts
	c.mu.Unlock()
	c.log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", delay).Msg("cannot connect to WhatsApp")
	if st := c.state(); st == channel.StateConnecting || st == channel.StateConnected {
		c.setState(channel.StateReconnecting, detailReconnecting)
	}
	c.schedule(jobReconnect, delay)
}
