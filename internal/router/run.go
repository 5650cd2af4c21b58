package router

import (
	"context"
	"errors"
	"fmt"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// runMessages is the queue's RunMessages handler: one container for the
// group's pending messages (agentrun.Runner.Messages), handed over by
// handover. q is the queue's object for the run; the run keeps it.
func (r *Router) runMessages(ctx context.Context, q *groupqueue.Run) error {
	folder := store.Folder(q.Group())
	gs := r.state(folder)
	run, g, text, err := r.handover(ctx, folder, gs, q)
	if run == nil {
		return err
	}
	return r.runs.Messages(ctx, g, &gs.Group, run, text)
}

// handover takes the group's pending messages for a new container: the
// batch the message loop handed the run object, or, when there is none or
// it is out of date (a retry; the cursor or the group changed since), a
// fresh read, whose trigger and budget are checked here. It returns nil
// when none would wake the agent (or the group was removed). Until it has
// run, a pipe into this run hands nothing over (the loop offers its batch
// instead); when it returns nil the run is marked closing, so later
// messages start a new run.
func (r *Router) handover(ctx context.Context, folder store.Folder, gs *groupState, q *groupqueue.Run) (*agentrun.Run, store.Group, string, error) {
	gs.Lock()
	defer gs.Unlock()
	var g store.Group
	run, text, err := func() (*agentrun.Run, string, error) {
		if err := gs.Load(ctx, r.db, folder); err != nil {
			return nil, "", err
		}
		b, ok := gs.Take()
		if !ok || b.Version != r.db.Groups.Version() {
			var err error
			if g, err = r.db.Groups.ByFolder(ctx, folder); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					r.log.Info().Str("group", string(folder)).Msg("group was removed; its messages are not run")
					return nil, "", nil
				}
				return nil, "", err
			}
			msgs, omitted, err := r.readPending(ctx, g, gs)
			if err != nil {
				return nil, "", err
			}
			msgs = r.newSessions(ctx, g, gs, msgs)
			if len(msgs) == 0 || !r.triggered(g, msgs) {
				return nil, "", nil
			}
			paused := r.paused(ctx, g)
			r.budgetDecided(ctx, g, gs, msgs[len(msgs)-1].ID, paused)
			if paused {
				r.log.Info().Str("group", string(g.Folder)).Msg("agent paused by its daily budget; messages wait")
				return nil, "", nil
			}
			b = agentrun.Batch{Group: g, After: gs.Handed(), Msgs: msgs, Omitted: omitted}
		}
		g = b.Group
		msgs := b.Msgs
		text, n := prompt.Fit(r.cfg.Timezone, r.now(), msgs, b.Omitted, ipc.MaxTextBytes)
		r.noteLeftOut(g, gs, msgs[len(msgs)-n].ID, len(msgs)-n+b.Omitted)
		run := r.runs.BeginMessages(&gs.Group, q, g, msgs[len(msgs)-1].ID)
		r.log.Info().Str("group", string(g.Folder)).Int("messages", n).Int("left_out", len(msgs)-n+b.Omitted).Msg("starting agent for messages")
		return run, text, nil
	}()
	if run == nil {
		q.MarkClosing()
	}
	if err != nil {
		return nil, g, "", agentrun.NewRunError(folder, err)
	}
	return run, g, text, nil
}

// Outcome is the queue's report of how a run ended (groupqueue.Outcomes):
// the one way run outcomes reach the router. A failed message run the queue
// retries shows in Status until the group's next good run; one that failed
// for good is recorded and told in the chat once; a dropped task's run log
// says so.
func (r *Router) Outcome(name string, o groupqueue.Outcome[store.Task]) {
	folder := store.Folder(name)
	if o.Event == groupqueue.Dropped {
		r.runs.TaskDropped(o.Task.Task)
		return
	}
	if r.stopping.Load() {
		return
	}
	defer r.turnEnded(folder, o)
	why := agentrun.Reason(o.Err)
	r.mu.Lock()
	delete(r.retrying, folder)
	if o.Event == groupqueue.Retrying {
		r.retrying[folder] = Failure{Time: r.now(), Group: name, Kind: string(groupqueue.KindMessages),
			Error: prompt.Clip(fmt.Sprintf("attempt %d of %d failed, retrying: %s", o.Attempt, o.Attempts, why), 500)}
	}
	r.mu.Unlock()
	if o.Event == groupqueue.Succeeded {
		r.alert(func(ctx context.Context, a Alerts) { a.Recovered(ctx, folder) })
	}
	if o.Event != groupqueue.GaveUp {
		return
	}
	r.log.Error().Err(o.Err).Str("group", name).Int("attempts", o.Attempt).Msg("agent failed for good; waiting for the next message")
	r.addFailure(Failure{Time: r.now(), Group: name, Kind: string(groupqueue.KindMessages), Error: prompt.Clip(o.Err.Error(), 500)})
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	g, err := r.db.Groups.ByFolder(ctx, folder)
	if err != nil {
		r.log.Warn().Err(err).Str("group", name).Msg("cannot look up the group to tell its chat")
		return
	}
	if refusal, ok := agentrun.AsAPIRefusal(o.Err); ok {
		// Waiting cannot heal it: the chat is told the fix, the owner is
		// alerted once (for every group: the credential is the daemon's).
		r.notice(g.Chat, folder, refusal.Notice())
		if !g.IsMain {
			r.alert(func(ctx context.Context, a Alerts) { a.APIRefused(ctx, folder, refusal.Label(), refusal.Fix()) })
		}
		return
	}
	r.notice(g.Chat, folder, prompt.GaveUpNotice(o.Attempt, why))
	if g.IsMain {
		// The owner reads the main chat: the notice above already told them.
		return
	}
	r.alert(func(ctx context.Context, a Alerts) {
		a.GaveUp(ctx, folder, o.Attempt, prompt.Clip(prompt.OneLine(why), 200))
	})
}

// runOwner is the router as its runs see it (agentrun.Owner).
type runOwner struct{ r *Router }

func (o runOwner) Notice(chat store.ChatID, folder store.Folder, text string) {
	o.r.notice(chat, folder, text)
}

func (o runOwner) Spent(ctx context.Context, g store.Group) { o.r.spent(ctx, g) }

func (o runOwner) Wake() { o.r.out.Wake() }

func (o runOwner) SetTyping(chat store.ChatID, on bool) { o.r.out.SetTyping(string(chat), on) }
