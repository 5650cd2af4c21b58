package whatsapp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/appstate"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

// App-state healing. WhatsApp keeps the account's settings (contacts,
// mutes, pins, push name …) in app-state collections that every linked
// device syncs. When one cannot be decoded, whatsmeow reports
// events.AppStateSyncError; bridged then re-fetches that collection from
// scratch, and when that fails too asks the phone for a copy
// (whatsmeow.BuildAppStateRecoveryRequest, a peer data operation), at most
// once per AppStateRecoveryInterval per collection. events.AppStateSyncComplete
// for the collection ends the condition. While it lasts Status shows it as
// the condition "app-state" (health app-state-sync), told to the owner once.
const (
	// AppStateRecoveryInterval is the least time between two recovery
	// requests to the phone for one collection.
	AppStateRecoveryInterval = 48 * time.Hour
	// appStateFetchTimeout bounds one full re-fetch.
	appStateFetchTimeout = 2 * time.Minute
)

// appState owns the app-state collections out of sync: which, since when,
// and the heal running for each.
type appState struct {
	*core

	mu      sync.Mutex
	broken  map[appstate.WAPatchName]brokenState // collections out of sync, until each syncs again
	healing map[appstate.WAPatchName]bool        // a re-fetch is running
}

// brokenState is an app-state collection out of sync: why, and since when.
type brokenState struct {
	why   string
	since time.Time
}

func newAppState(co *core) *appState {
	return &appState{
		core:    co,
		broken:  make(map[appstate.WAPatchName]brokenState),
		healing: make(map[appstate.WAPatchName]bool),
	}
}

func recoveryKey(name appstate.WAPatchName) string { return "appstate_recovery/" + string(name) }

// handleEvent handles events.AppStateSyncError and
// events.AppStateSyncComplete. whatsmeow dispatches the error while it
// holds its app-state lock, so the healing runs on its own goroutine.
func (c *appState) handleEvent(evt any) {
	switch e := evt.(type) {
	case *events.AppStateSyncError:
		why := "unknown error"
		if e.Error != nil {
			why = e.Error.Error()
		}
		c.mu.Lock()
		b, was := c.broken[e.Name]
		if !was {
			b.since = c.now()
		}
		b.why = why
		c.broken[e.Name] = b
		busy := c.healing[e.Name]
		if !busy {
			c.healing[e.Name] = true
		}
		c.mu.Unlock()
		c.log.Warn().Str("collection", string(e.Name)).Bool("full_sync", e.FullSync).Str("error", why).
			Msg("WhatsApp app state out of sync; healing it")
		if busy {
			return // the running heal sees this failure through its own result
		}
		c.background(func() {
			defer func() {
				c.mu.Lock()
				delete(c.healing, e.Name)
				c.mu.Unlock()
			}()
			c.heal(c.base, e.Name, e.FullSync)
		})
	case *events.AppStateSyncComplete:
		c.mu.Lock()
		_, was := c.broken[e.Name]
		delete(c.broken, e.Name)
		c.mu.Unlock()
		if was {
			c.log.Info().Str("collection", string(e.Name)).Uint64("version", e.Version).Bool("recovery", e.Recovery).
				Msg("WhatsApp app state back in sync")
		}
	}
}

// heal re-fetches name in full unless the failure came from a full
// sync already, then asks the phone for a copy if the collection is still
// broken.
func (c *appState) heal(ctx context.Context, name appstate.WAPatchName, wasFull bool) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Any("panic", r).Str("collection", string(name)).Msg("app state healing panicked")
		}
	}()
	if !wasFull {
		fctx, cancel := context.WithTimeout(ctx, appStateFetchTimeout)
		err := upkeepOf(c.wa).FetchAppState(fctx, name, true, false)
		cancel()
		if err == nil && !c.isBroken(name) {
			return
		}
		if err != nil {
			c.log.Warn().Err(err).Str("collection", string(name)).Msg("full re-fetch of WhatsApp app state failed")
		}
	}
	if ctx.Err() != nil || !c.isBroken(name) {
		return
	}
	c.requestRecovery(ctx, name)
}

func (c *appState) isBroken(name appstate.WAPatchName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.broken[name]
	return ok
}

// requestRecovery asks the phone for a copy of name unless it was
// asked less than AppStateRecoveryInterval ago.
func (c *appState) requestRecovery(ctx context.Context, name appstate.WAPatchName) {
	log := c.log.With().Str("collection", string(name)).Logger()
	last, err := readTime(ctx, c.kv, recoveryKey(name))
	if err != nil {
		log.Warn().Err(err).Msg("cannot read when app state recovery was last asked; asking now")
	}
	now := c.now()
	if !last.IsZero() && now.Sub(last) < AppStateRecoveryInterval {
		log.Info().Time("asked_at", last).Msg("app state recovery asked of the phone recently; waiting")
		return
	}
	if _, err := upkeepOf(c.wa).SendPeerMessage(ctx, whatsmeow.BuildAppStateRecoveryRequest(name)); err != nil {
		log.Warn().Err(err).Msg("cannot ask the phone for an app state recovery")
		return
	}
	if err := writeTime(ctx, c.kv, recoveryKey(name), now); err != nil {
		log.Warn().Err(err).Msg("cannot record the app state recovery request")
	}
	log.Info().Msg("asked the phone for a copy of the app state")
}

// condition is the app-state condition of Status; ok is false
// when every collection is in sync.
func (c *appState) condition() (cond channel.Condition, ok bool) {
	c.mu.Lock()
	var names []string
	var since time.Time
	for n, b := range c.broken {
		names = append(names, string(n))
		if since.IsZero() || b.since.Before(since) {
			since = b.since
		}
	}
	c.mu.Unlock()
	if len(names) == 0 {
		return channel.Condition{}, false
	}
	slices.Sort(names)
	return channel.Condition{
		Key: condAppState, Health: channel.HealthAppStateSync, Since: since,
		Text: fmt.Sprintf("WhatsApp's app state (contacts, chat settings) is out of sync (%s): bridged re-fetched it and asks the phone "+
			"for a copy at most every %d hours. Open WhatsApp on the phone; `bridged status` shows when it is in sync again.",
			strings.Join(names, ", "), int(AppStateRecoveryInterval/time.Hour)),
	}, true
}
