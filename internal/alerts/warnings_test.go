package alerts

import (
	"context"
	"sync"
	"testing"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
)

// warnChannel is a connected channel reporting warnings (as WhatsApp's phone
// liveness does).
type warnChannel struct {
	*channeltest.Fake
	mu   sync.Mutex
	warn map[string]string
}

func (c *warnChannel) Warnings() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.warn
}

func (c *warnChannel) set(w map[string]string) {
	c.mu.Lock()
	c.warn = w
	c.mu.Unlock()
}

// A channel's warning is told once while it lasts, also across a restart,
// and again after it cleared and came back.
func TestChannelWarningsOnceWhileTheyLast(t *testing.T) {
	e := newEnv(t, 0)
	ch := &warnChannel{Fake: channeltest.New("whatsapp")}
	cfg := Config{Channels: []channel.Channel{ch}}
	a, p := e.open(cfg)
	ctx := context.Background()
	offline := map[string]string{"whatsapp-phone-offline": "WhatsApp: the phone has not been online for 12 days."}

	a.check(ctx)
	wantPosts(t, p.take())
	ch.set(offline)
	a.check(ctx)
	a.check(ctx)
	wantPosts(t, p.take(), "local:main WhatsApp: the phone has not been online for 12 days.")

	a, p = e.open(cfg) // a restart while it lasts
	a.check(ctx)
	wantPosts(t, p.take())

	ch.set(nil)
	a.check(ctx)
	ch.set(offline)
	a.check(ctx)
	wantPosts(t, p.take(), "local:main WhatsApp: the phone has not been online for 12 days.")
}
