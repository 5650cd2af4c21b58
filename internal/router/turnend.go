package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// turnEnded tells the turns hub how a message run of folder ended, once the
// queue judged it (a turn that committed its reply was told by agentrun
// already). A run that ended well settled its chat up to the group's
// cursor; a failed one failed every message of the chat stored by then that
// was not answered.
func (r *Router) turnEnded(folder store.Folder, o groupqueue.Outcome[store.Task]) {
	if r.turns == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	g, err := r.db.Groups.ByFolder(ctx, folder)
	if err != nil {
		return // removed: nobody can wait on its chat
	}
	e := turns.End{Chat: string(g.Chat), Attempt: o.Attempt, Attempts: o.Attempts}
	var upto store.MessageID
	switch o.Event {
	case groupqueue.Succeeded:
		e.Result = turns.Done
		upto, err = r.db.Sessions.Cursor(ctx, folder)
	case groupqueue.Retrying, groupqueue.GaveUp:
		e.Result = turns.Failed
		if o.Event == groupqueue.GaveUp {
			e.Result = turns.GaveUp
		}
		if o.Err != nil {
			e.Reason = prompt.Clip(prompt.OneLine(agentrun.Reason(o.Err)), 300)
		}
		upto, err = r.db.Messages.LatestID(ctx, g.Chat)
	default:
		return
	}
	if err != nil {
		r.log.Warn().Err(err).Str("group", string(folder)).Msg("cannot tell how the turn ended")
		return
	}
	e.Upto = int64(upto)
	r.turns.Ended(e)
}
