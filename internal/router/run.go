package router

import (
	"context"
	"errors"
	"fmt"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

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
	g, err := r.db.GetGroupByFolder(ctx, folder)
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

// Batch reads folder's pending messages again for a container start the
// message loop left no batch for (a retry), with the group as it is now.
func (o runOwner) Batch(ctx context.Context, grp *agentrun.Group, folder store.Folder) (agentrun.Batch, bool, error) {
	r := o.r
	version := r.db.GroupsVersion()
	g, err := r.db.GetGroupByFolder(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		r.log.Info().Str("group", string(folder)).Msg("group was removed; its messages are not run")
		return agentrun.Batch{}, false, nil
	}
	if err != nil {
		return agentrun.Batch{}, false, err
	}
	return r.wake(ctx, g, version, grp)
}
