package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/store"
)

// AgentAction runs do, which carries out one request of group folder's agent
// that changes something other than sending a message (schedule_task,
// update_task, pause/resume/cancel_task, register_group), and hands it
// commit, which do calls inside the transaction that commits the action.
// do reports whether the action was committed.
//
// While the group's agent works on messages, commit stores in that
// transaction the cursor of the messages handed to the agent's turn, exactly
// as a send_message to its own chat does: an action counts like a reply, so
// if the turn then fails (or the daemon dies) its messages are not run again,
// which would make the agent act a second time. A turn that acted and then
// failed is reported in the chat instead (see runMessagesFor). Outside a
// message run commit does nothing.
//
// The group's lock is held while do runs (the lock is always taken before a
// transaction), so the cursor stored is the one of the turn in flight.
func (r *Router) AgentAction(ctx context.Context, folder string, do func(commit func(ctx context.Context, tx *store.Tx) error) bool) {
	noop := func(context.Context, *store.Tx) error { return nil }
	r.mu.Lock()
	gs := r.groups[store.Folder(folder)]
	r.mu.Unlock()
	if gs == nil {
		do(noop)
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	run := gs.run
	// A run whose turn failed for good stores no cursor any more: its
	// messages run again from the last stored one.
	if run == nil || run.kind != groupqueue.KindMessages || run.broken != nil {
		do(noop)
		return
	}
	cursor := run.settled
	stored := false
	ok := do(func(ctx context.Context, tx *store.Tx) error {
		if err := tx.SetCursor(ctx, store.Folder(folder), cursor); err != nil {
			return err
		}
		stored = true
		return nil
	})
	switch {
	case ok && stored:
		gs.persisted = cursor
		run.acted = true
	case stored:
		// The transaction failed after the cursor was written, or the
		// action was undone (a group whose directories could not be
		// made): the stored cursor is put back.
		if err := r.db.SetCursor(context.WithoutCancel(ctx), store.Folder(folder), gs.persisted); err != nil {
			r.log.Error().Err(err).Str("group", folder).Msg("cannot put back the cursor after an undone agent action")
		}
	}
}
