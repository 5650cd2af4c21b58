package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/store"
)

// AgentAction runs do, which carries out one request of group folder's agent
// that changes something other than sending a message (schedule_task,
// update_task, pause/resume/cancel_task, register_group), and hands it
// commit, which do calls inside the transaction that commits the action.
// do reports whether the action was committed. While the group's agent works
// on messages, commit stores the cursor of the turn in flight with the
// action, so a turn that acted is never run again (agentrun.Runner.Action).
func (r *Router) AgentAction(ctx context.Context, folder string, do func(commit func(ctx context.Context, tx *store.Tx) error) bool) {
	r.runs.Action(ctx, r.runState(store.Folder(folder)), store.Folder(folder), do)
}
