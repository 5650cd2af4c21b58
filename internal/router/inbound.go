package router

import (
	"context"
	"errors"
	"time"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// errNoRun makes a pipe fall back to the queue: the queue's run has not
// handed messages to a container yet, or has ended.
var errNoRun = errors.New("no live container to pipe into")

func (r *Router) markAllDirty() { r.in.Rescan() }

// loop is the message loop: woken by the ingest (or at start for every group),
// it hands each changed group's pending messages to its agent.
func (r *Router) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case done := <-r.pings:
			close(done)
			continue
		case <-r.in.Wake():
		}
		dirty, all := r.in.Take()

		if all {
			version := r.db.Groups.Version()
			groups, err := r.db.Groups.List(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				r.log.Error().Err(err).Msg("cannot list groups")
				r.markAllDirty() // try again on the next wake
				continue
			}
			for _, g := range groups {
				r.protect("message loop", func() { r.consider(ctx, g, version) })
			}
			continue
		}
		for chat, seen := range dirty {
			// The ingest looked the group up for the chat's newest message;
			// while the registry has not changed since, that is the group.
			if !seen.Known || seen.Version != r.db.Groups.Version() {
				seen.Version = r.db.Groups.Version()
				g, err := r.db.Groups.ByChat(ctx, chat)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					if ctx.Err() != nil {
						return
					}
					r.log.Error().Err(err).Str("chat", string(chat)).Msg("cannot look up group")
					continue
				}
				seen.Group, seen.Registered = g, err == nil
			}
			if !seen.Registered {
				continue
			}
			r.protect("message loop", func() { r.consider(ctx, seen.Group, seen.Version) })
		}
	}
}

// consider hands g's pending messages to its agent if one of them wakes it:
// piped into a live message container, or else as a batch to the group's
// run object for its next container start, through the queue. version is
// the group registry's version g was looked up under. The budget is checked
// here, once: a batch handed over starts its container without another
// look.
func (r *Router) consider(ctx context.Context, g store.Group, version uint64) {
	log := r.log.With().Str("group", string(g.Folder)).Logger()
	gs := r.state(g.Folder)
	gs.Lock()
	defer gs.Unlock()
	if err := gs.Load(ctx, r.db, g.Folder); err != nil {
		log.Error().Err(err).Msg("cannot read cursor")
		return
	}
	msgs, omitted, err := r.readPending(ctx, g, gs)
	if err != nil {
		log.Error().Err(err).Msg("cannot read pending messages")
		return
	}
	msgs = r.newSessions(ctx, g, gs, msgs)
	if len(msgs) == 0 || !r.triggered(g, msgs) {
		gs.Drop()
		r.noteLate(g, gs, msgs)
		return
	}
	gs.lateTold = false
	paused := r.paused(ctx, g)
	r.budgetDecided(ctx, g, gs, msgs[len(msgs)-1].ID, paused)
	if paused {
		gs.Drop()
		log.Debug().Msg("agent paused by its daily budget; messages wait")
		return
	}
	batch := agentrun.Batch{Group: g, Version: version, After: gs.Handed(), Msgs: msgs, Omitted: omitted}
	live := false // piped into a live container, not left to a starting run
	piped, err := r.queue.TryPipe(string(g.Folder), func() error {
		run := gs.Live()
		if run == nil {
			// The queue's run has not taken its messages yet; it takes
			// this batch instead (and shows the typing indicator).
			gs.Offer(batch)
			return nil
		}
		if run.Kind != groupqueue.KindMessages || run.Chat != g.Chat || run.Stale(g) {
			// A container started with other settings than g's takes no
			// more messages: they wait for the next one.
			return errNoRun
		}
		text, n := prompt.Fit(r.cfg.Timezone, r.now(), msgs, omitted, ipc.MaxTextBytes)
		name, err := r.home.WriteInput(string(g.Folder), text)
		if err != nil {
			return err
		}
		r.noteLeftOut(g, gs, msgs[len(msgs)-n].ID, len(msgs)-n+omitted)
		gs.Drop()
		// An idle agent starts a turn for these messages at once.
		gs.Pipe(name, msgs[len(msgs)-1].ID, run.Idle())
		live = true
		return nil
	})
	if err != nil && !errors.Is(err, errNoRun) {
		log.Error().Err(err).Msg("cannot pipe messages into the container")
	}
	if piped {
		if live {
			log.Debug().Int("messages", len(msgs)).Msg("messages piped into the live container")
			r.out.SetTyping(string(g.Chat), true)
		}
		return
	}
	gs.Offer(batch)
	r.queue.EnqueueMessages(string(g.Folder))
}

// triggered reports whether msgs wake g's agent: always for the main group
// and groups that need no trigger; otherwise when a message starts with the
// group's trigger or mentions the bot. Bot messages never count, nor do
// late ones (a backlog: see Config.LateWindow).
func (r *Router) triggered(g store.Group, msgs []store.Message) bool {
	for _, m := range msgs {
		if !m.Late && r.wakes(g, m) {
			return true
		}
	}
	return false
}

// shortTimeout bounds the small writes done outside a caller's context.
const shortTimeout = 30 * time.Second
