package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"

	"github.com/bridged-app/bridged/internal/channel"
)

// Typing indicator timing: WhatsApp clears "composing" after about 25
// seconds, so it is repeated while the agent works, up to typingMax.
const (
	typingRefresh = 10 * time.Second
	typingMax     = 30 * time.Minute
)

// presence owns what the account shows: a chat's typing indicator while its
// agent works, and the account's own presence (available while any agent
// works, or always with Options.AlwaysOnline).
type presence struct {
	*core
	conn *connection

	mu      sync.Mutex               // guards the three maps below, never held across a call out
	typing  map[string]*typingLoop   // a chat's running typing loop
	turns   map[string]chan struct{} // a chat's one-slot turn: one set per chat at a time
	working map[string]bool          // chats whose agent works (typing on): the account is available

	sendMu sync.Mutex     // held across a presence send: one at a time, the last one current
	sent   types.Presence // what WhatsApp has from this connection; "" none yet

	wake chan struct{} // worker: send presence (the push name came, or working changed)
}

func newPresence(co *core, conn *connection) *presence {
	return &presence{
		core: co, conn: conn,
		typing:  make(map[string]*typingLoop),
		turns:   make(map[string]chan struct{}),
		working: make(map[string]bool),
		wake:    make(chan struct{}, 1),
	}
}

// set shows "composing" in chat while on (repeated so it does not
// fade while the agent works) and "paused" when turned off. Best effort:
// nothing is sent while WhatsApp is not connected. Changes for one chat
// take turns, so no loop is left behind and a late "composing" cannot
// overtake a "paused"; a change waits for its turn no longer than ctx, and
// a slow network in one chat never holds up another's. While any chat's
// indicator is on the account is available, else unavailable (see
// Options.AlwaysOnline): sent before "composing", after "paused".
func (c *presence) set(ctx context.Context, chat string, on bool) error {
	to, err := parseChat(chat)
	if err != nil {
		return err
	}
	c.setWorking(chat, on)
	turn := c.turnOf(chat)
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-turn }()
	c.stop(chat)
	if c.conn.state() != channel.StateConnected || c.base.Err() != nil {
		return nil
	}
	if !on {
		if err := c.wa.SendChatPresence(ctx, to, types.ChatPresencePaused, types.ChatPresenceMediaText); err != nil {
			return fmt.Errorf("send paused to %s: %w", chat, err)
		}
		c.sync(ctx)
		return nil
	}
	// Available first: WhatsApp relays "composing" only from an available
	// client.
	c.sync(ctx)
	if err := c.wa.SendChatPresence(ctx, to, types.ChatPresenceComposing, types.ChatPresenceMediaText); err != nil {
		return fmt.Errorf("send composing to %s: %w", chat, err)
	}
	loopCtx, cancel := context.WithTimeout(c.base, typingMax)
	t := &typingLoop{cancel: cancel, done: make(chan struct{})}
	started := c.spawn(func() {
		defer close(t.done)
		defer cancel()
		c.keep(loopCtx, to)
	})
	if !started { // the client is closing
		cancel()
		return nil
	}
	c.mu.Lock()
	c.typing[chat] = t
	c.mu.Unlock()
	return nil
}

type typingLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// turnOf returns chat's turn: a one-slot channel a SetTyping fills
// while it changes chat's indicator.
func (c *presence) turnOf(chat string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	turn := c.turns[chat]
	if turn == nil {
		turn = make(chan struct{}, 1)
		c.turns[chat] = turn
	}
	return turn
}

// stop ends chat's typing loop and waits for it, so a later "paused"
// cannot be overtaken by a late "composing". The caller holds chat's turn.
func (c *presence) stop(chat string) {
	c.mu.Lock()
	t := c.typing[chat]
	delete(c.typing, chat)
	c.mu.Unlock()
	if t != nil {
		t.cancel()
		<-t.done
	}
}

func (c *presence) keep(ctx context.Context, to types.JID) {
	tick := time.NewTicker(typingRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if c.conn.state() != channel.StateConnected {
				continue
			}
			if err := c.wa.SendChatPresence(ctx, to, types.ChatPresenceComposing, types.ChatPresenceMediaText); err != nil && ctx.Err() == nil {
				c.log.Debug().Err(err).Str("chat", to.String()).Msg("cannot refresh typing indicator")
			}
		}
	}
}

// want is the presence the account should have: available while an
// agent works in one of its chats (WhatsApp relays typing notifications only
// from available clients) or with AlwaysOnline, else unavailable (while a
// linked device is available, WhatsApp does not notify the owner's phone).
func (c *presence) want() types.Presence {
	c.mu.Lock()
	working := len(c.working) > 0
	c.mu.Unlock()
	if working || c.opts.AlwaysOnline {
		return types.PresenceAvailable
	}
	return types.PresenceUnavailable
}

// sync sends the presence the account should have now unless
// WhatsApp has it already. Sends take turns, and each decides what it sends
// once it has its turn, so the last one sent is the current one. Nothing is
// sent while WhatsApp is not connected (the next connection sends it).
func (c *presence) sync(ctx context.Context) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	want := c.want()
	if want == c.sent || c.conn.state() != channel.StateConnected {
		return
	}
	err := c.wa.SendPresence(ctx, want)
	switch {
	case errors.Is(err, whatsmeow.ErrNoPushName):
		c.log.Debug().Msg("presence not sent yet: push name not synced")
	case err != nil:
		c.log.Warn().Err(err).Str("presence", string(want)).Msg("cannot send presence")
	default:
		c.sent = want
	}
}

// setWorking records whether an agent works in chat and, when that changes
// whether the account should be available, has the worker send it (the
// presence of a connection that comes later). It never blocks on the
// network.
func (c *presence) setWorking(chat string, on bool) {
	c.mu.Lock()
	before := len(c.working) > 0
	if on {
		c.working[chat] = true
	} else {
		delete(c.working, chat)
	}
	after := len(c.working) > 0
	c.mu.Unlock()
	if before != after {
		signal(c.wake)
	}
}

// reset forgets what WhatsApp had: a new connection has no presence yet.
func (c *presence) reset() {
	c.sendMu.Lock()
	c.sent = ""
	c.sendMu.Unlock()
}
