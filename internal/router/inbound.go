package router

import (
	"context"
	"errors"
	"time"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/store"
)

// loop is the message loop: woken by the ingest (or at start for every group),
// it hands each changed group's pending messages to its agent. A ping is
// answered after what the loop was woken for before it (Ping).
func (r *Router) loop(ctx context.Context) {
	for {
		var done chan struct{}
		select {
		case <-ctx.Done():
			return
		case done = <-r.pings:
			select {
			case <-r.in.Wake():
			default:
				close(done)
				continue
			}
		case <-r.in.Wake():
		}
		if !r.pass(ctx) {
			return
		}
		if done != nil {
			close(done)
		}
	}
}

// pass hands each group changed since the last to consider; false when ctx ended.
func (r *Router) pass(ctx context.Context) bool {
	dirty, all := r.in.Take()
	if all {
		version := r.db.Groups.Version()
		groups, err := r.db.Groups.List(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			r.log.Error().Err(err).Msg("cannot list groups")
			r.in.Rescan() // try again on the next wake
			return true
		}
		for _, g := range groups {
			r.protect("message loop", func() { r.consider(ctx, g, version) })
		}
		return true
	}
	for chat, seen := range dirty {
		// The ingest looked the group up for the chat's newest message;
		// while the registry has not changed since, that is the group.
		if !seen.Known || seen.Version != r.db.Groups.Version() {
			seen.Version = r.db.Groups.Version()
			g, err := r.db.Groups.ByChat(ctx, chat)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				if ctx.Err() != nil {
					return false
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
	return true
}

// consider hands g's pending messages to its agent if one of them wakes
// it: to the group's run object (agentrun.Runner.Hand), which pipes them
// into its live container or keeps them for its next container start and
// asks the queue for a slot. version is the group registry's version g was
// looked up under. The budget is checked here, once: a batch handed over
// starts its container without another look.
func (r *Router) consider(ctx context.Context, g store.Group, version uint64) {
	grp := r.runs.Group(g.Folder)
	grp.Lock()
	defer grp.Unlock()
	if err := grp.Load(ctx, r.db, g.Folder); err != nil {
		r.log.Error().Err(err).Str("group", string(g.Folder)).Msg("cannot read cursor")
		return
	}
	b, ok, err := r.wake(ctx, g, version, grp)
	if err != nil {
		r.log.Error().Err(err).Str("group", string(g.Folder)).Msg("cannot read pending messages")
	}
	if !ok {
		grp.Drop()
		return
	}
	r.runs.Hand(grp, b)
}

// wake reads g's pending messages after grp's handed cursor and returns
// them as the batch to hand over when they wake its agent: the owner's /new
// is acted on and left out, the trigger and the late mark are judged (the
// chat told once of late messages that started nothing), and the budget is
// asked and its decision recorded. ok is false when nothing is to be handed
// over. grp's lock must be held.
func (r *Router) wake(ctx context.Context, g store.Group, version uint64, grp *agentrun.Group) (agentrun.Batch, bool, error) {
	msgs, omitted, err := r.readPending(ctx, g, grp)
	if err != nil {
		return agentrun.Batch{}, false, err
	}
	msgs = r.newSessions(ctx, g, grp, msgs)
	if len(msgs) == 0 || !r.triggered(g, msgs) {
		r.noteLate(g, grp, msgs)
		return agentrun.Batch{}, false, nil
	}
	grp.Notes.LateTold = false
	paused := r.paused(ctx, g)
	r.budgetDecided(ctx, g, grp, msgs[len(msgs)-1].ID, paused)
	if paused {
		r.log.Debug().Str("group", string(g.Folder)).Msg("agent paused by its daily budget; messages wait")
		return agentrun.Batch{}, false, nil
	}
	return agentrun.Batch{Group: g, Version: version, After: grp.Handed(), Msgs: msgs, Omitted: omitted}, true, nil
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
