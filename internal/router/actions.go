package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/store"
)

// HoldTurn holds still the turn in flight of group folder's agent while one
// of its requests that changes something other than sending a message
// (schedule_task, update_task, pause/resume/cancel_task, register_group)
// commits, and returns the turn's part of that request's unit of work. While
// the group's agent works on messages, applying it stores the cursor of the
// turn in flight with the action, so a turn that acted is never run again
// (agentrun.Runner.Hold).
func (r *Router) HoldTurn(ctx context.Context, folder string) ipchost.TurnHold {
	return r.runs.Hold(r.runs.Known(store.Folder(folder)), store.Folder(folder))
}

var _ ipchost.ApprovalHolder = (*Router)(nil)

// HoldApproval holds the turn in flight of group folder's agent open while
// one of its tool calls waits for the owner's approval: until release is
// called, the container's hard timeout starts over instead of stopping it,
// and the idle close cannot come (agentrun.Group.Hold). A group without a
// live run has nothing to hold; release then does nothing. release may be
// called more than once, from any goroutine. It takes the group's lock.
func (r *Router) HoldApproval(folder string) (release func()) {
	return r.runs.HoldApproval(store.Folder(folder))
}

// ApplySettings brings folder's settings as stored now to its running
// agent (agentrun.Runner.ApplySettings); it says how they apply.
func (r *Router) ApplySettings(ctx context.Context, folder store.Folder) (agentrun.Applied, error) {
	return r.runs.ApplySettings(ctx, folder)
}

// Idle runs fn while no turn of folder's group runs and none can begin
// (agentrun.Runner.Idle): agentrun.ErrTurnRunning while one does.
func (r *Router) Idle(folder store.Folder, fn func() error) error { return r.runs.Idle(folder, fn) }
