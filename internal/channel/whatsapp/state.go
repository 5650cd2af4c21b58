package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
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

// handleConnEvent applies a connection event. Events whatsmeow dispatches
// asynchronously can arrive late, so a stale keepalive or disconnect event
// never overrides a state only the owner (or a ban's expiry) can end.
func (c *Client) handleConnEvent(evt any) {
	t, ok := connTransition(evt, c.now())
	if !ok {
		return
	}
	cur := c.Status()
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
	c.noteTransition(cur.State, t.state)
	c.applyTransition(t)
}

// applyTransition records t and schedules its job.
func (c *Client) applyTransition(t transition) {
	switch t.state {
	case channel.StateConnected:
		c.mu.Lock()
		c.attempts = 0
		c.outdatedTry = false
		c.mu.Unlock()
		c.setState(t.state, t.detail)
		if t.fresh {
			signal(c.connected)
			signal(c.historyWake)
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
func (c *Client) schedule(kind jobKind, delay time.Duration) {
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
func (c *Client) supervise(ctx context.Context) {
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

func (c *Client) runJob(ctx context.Context, kind jobKind) {
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
	if st := c.Status().State; st == channel.StateBanned || st == channel.StateOutdated {
		c.setState(channel.StateReconnecting, detailReconnecting)
	}
	c.connectOnce(ctx)
}

// connectOnce makes one connection attempt and schedules the next one if it
// fails.
func (c *Client) connectOnce(ctx context.Context) {
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
	if st := c.Status().State; st == channel.StateConnecting || st == channel.StateConnected {
		c.setState(channel.StateReconnecting, detailReconnecting)
	}
	c.schedule(jobReconnect, delay)
}

// work sends presence and refreshes group names after each connection and
// once a day, and pings a phone long offline, outside the event handler.
func (c *Client) work(ctx context.Context) {
	daily := time.NewTimer(groupSyncInterval)
	defer daily.Stop()
	phone := time.NewTicker(phoneCheckInterval)
	defer phone.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-phone.C:
			if c.Status().State == channel.StateConnected {
				c.maybePingPhone()
			}
		case <-c.presence:
			c.syncPresence(ctx)
		case <-c.connected:
			c.presenceMu.Lock()
			c.presenceSent = "" // a new connection has none yet
			c.presenceMu.Unlock()
			c.syncPresence(ctx)
			c.syncGroups(ctx)
			daily.Reset(groupSyncInterval)
		case <-daily.C:
			if c.Status().State == channel.StateConnected {
				c.syncGroups(ctx)
			}
			daily.Reset(groupSyncInterval)
		}
	}
}

// wantPresence is the presence the account should have: available while an
// agent works in one of its chats (WhatsApp relays typing notifications only
// from available clients) or with AlwaysOnline, else unavailable (while a
// linked device is available, WhatsApp does not notify the owner's phone).
func (c *Client) wantPresence() types.Presence {
	c.typingMu.Lock()
	working := len(c.working) > 0
	c.typingMu.Unlock()
	if working || c.opts.AlwaysOnline {
		return types.PresenceAvailable
	}
	return types.PresenceUnavailable
}

// syncPresence sends the presence the account should have now unless
// WhatsApp has it already. Sends take turns, and each decides what it sends
// once it has its turn, so the last one sent is the current one. Nothing is
// sent while WhatsApp is not connected (the next connection sends it).
func (c *Client) syncPresence(ctx context.Context) {
	c.presenceMu.Lock()
	defer c.presenceMu.Unlock()
	want := c.wantPresence()
	if want == c.presenceSent || c.Status().State != channel.StateConnected {
		return
	}
	err := c.wa.SendPresence(ctx, want)
	switch {
	case errors.Is(err, whatsmeow.ErrNoPushName):
		c.log.Debug().Msg("presence not sent yet: push name not synced")
	case err != nil:
		c.log.Warn().Err(err).Str("presence", string(want)).Msg("cannot send presence")
	default:
		c.presenceSent = want
	}
}

// setWorking records whether an agent works in chat and, when that changes
// whether the account should be available, has the worker send it (the
// presence of a connection that comes later). It never blocks on the
// network.
func (c *Client) setWorking(chat string, on bool) {
	c.typingMu.Lock()
	before := len(c.working) > 0
	if on {
		c.working[chat] = true
	} else {
		delete(c.working, chat)
	}
	after := len(c.working) > 0
	c.typingMu.Unlock()
	if before != after {
		signal(c.presence)
	}
}

func (c *Client) syncGroups(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Any("panic", r).Msg("group name sync panicked")
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, groupSyncTimeout)
	defer cancel()
	n, err := c.RefreshGroups(ctx)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot sync group names")
		return
	}
	c.log.Info().Int("groups", n).Msg("synced group names")
}
