package router

import (
	"context"
	"errors"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/store"
)

// runOwner is the router as its runs see it (agentrun.Owner).
type runOwner struct{ r *Router }

func (o runOwner) Notice(chat store.ChatID, folder store.Folder, text string) {
	o.r.notice(chat, folder, text)
}

func (o runOwner) Spent(ctx context.Context, g store.Group) { o.r.spent(ctx, g) }

func (o runOwner) Paused(ctx context.Context, g store.Group) bool { return o.r.paused(ctx, g) }

func (o runOwner) Alert(tell func(context.Context, agentrun.Alerts)) {
	o.r.alert(func(ctx context.Context, a Alerts) { tell(ctx, a) })
}

func (o runOwner) Wake() { o.r.out.Wake() }

func (o runOwner) SetTyping(chat store.ChatID, on bool) { o.r.out.SetTyping(string(chat), on) }

// Batch reads folder's pending messages again for a container start the
// message loop left no batch for (a retry), with the group as it is now.
func (o runOwner) Batch(ctx context.Context, grp *agentrun.Group, folder store.Folder) (agentrun.Batch, bool, error) {
	r := o.r
	version := r.db.Groups.Version()
	g, err := r.db.Groups.ByFolder(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		r.log.Info().Str("group", string(folder)).Msg("group was removed; its messages are not run")
		return agentrun.Batch{}, false, nil
	}
	if err != nil {
		return agentrun.Batch{}, false, err
	}
	return r.wake(ctx, g, version, grp)
}

// TaskNotRun tells the owner that task t was paused instead of run; why is
// rules.TaskMayRun's reason. The scheduler calls it for a task it paused
// at its claim. It does not block for long.
func (r *Router) TaskNotRun(t store.Task, why string) { r.runs.TaskNotRun(t, why) }
