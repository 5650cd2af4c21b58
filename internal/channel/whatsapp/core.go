package whatsapp

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// core is what every part of the client shares: fixed at construction
// (tests replace wa, sink and now before events flow), and the client's
// lifetime. Each part embeds the one *core and keeps its own state beside
// it.
type core struct {
	opts Options
	log  zerolog.Logger
	wa   waClient
	sink Sink // Options.Sink
	now  func() time.Time
	kv   kvStore // bridged_kv in the device store; memory in tests

	// base is cancelled by Close; it bounds typing loops and event handling.
	base       context.Context
	cancelBase context.CancelFunc
	wg         sync.WaitGroup // every goroutine the client starts, through spawn
	lifeMu     sync.Mutex     // orders spawn's wg.Add before Close's wg.Wait
	closed     bool           // guarded by lifeMu: Close has begun, spawn starts nothing
	closeOnce  sync.Once
}

func newCore(opts Options, wa waClient) *core {
	base, cancel := context.WithCancel(context.Background())
	return &core{
		opts:       opts,
		log:        opts.Log.With().Str("component", "whatsapp").Logger(),
		wa:         wa,
		sink:       opts.Sink,
		now:        time.Now,
		kv:         &memKV{},
		base:       base,
		cancelBase: cancel,
	}
}

// spawn runs fn on its own goroutine, which Close waits for, and reports
// whether it did: once Close has begun it starts nothing. Every goroutine
// of the client starts here, so no wg.Add can race Close's wg.Wait.
func (c *core) spawn(fn func()) bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// background runs fn on its own goroutine, which Close waits for; nothing
// starts once the client is closed.
func (c *core) background(fn func()) {
	if c.base.Err() != nil {
		return
	}
	c.spawn(fn)
}

// stop starts nothing more, cancels the base context and waits for every
// goroutine spawn started.
func (c *core) stop() {
	c.lifeMu.Lock()
	c.closed = true
	c.lifeMu.Unlock()
	c.cancelBase()
	c.wg.Wait()
}
