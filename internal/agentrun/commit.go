package agentrun

import (
	"context"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/store"
)

// Send commits item to the outbox. When grp (nil: none) has a live message
// run for item's chat whose turns have not failed, the message counts as a
// reply of that run: the cursor of the messages whose turn has begun is
// stored in the same transaction, and from then on they are not run again.
// It takes the group's lock.
func (x *Runner) Send(ctx context.Context, grp *Group, item store.OutboxItem) (store.OutboxItem, error) {
	var run *Run
	if grp != nil {
		grp.Lock()
		defer grp.Unlock()
		// A run whose turn failed for good stores no cursor any more: its
		// messages run again from the last stored one.
		if rn := grp.run; rn != nil && rn.Kind == groupqueue.KindMessages && rn.Chat == item.Chat && rn.broken == nil {
			run = rn
		}
	}
	var stored store.OutboxItem
	err := x.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if stored, err = tx.EnqueueOutbox(ctx, item); err != nil {
			return err
		}
		if run != nil {
			return tx.SetCursor(ctx, item.Group, run.settled)
		}
		return nil
	})
	if err != nil {
		return store.OutboxItem{}, err
	}
	if run != nil {
		run.replied = true
		run.acted = false // the chat heard from the agent after it acted
		grp.persisted = run.settled
		x.publish(item.Group, run)
	}
	return stored, nil
}

// Action runs do, which carries out one request of group folder's agent
// that changes something other than sending a message, and hands it commit,
// which do calls inside the transaction that commits the action. do reports
// whether the action was committed.
//
// While grp (nil: none) has a live message run whose turns have not failed,
// commit stores in that transaction the cursor of the messages handed to the
// agent's turn, exactly as Send does for a message to its own chat: an
// action counts like a reply, so if the turn then fails (or the daemon dies)
// its messages are not run again, which would make the agent act a second
// time; Messages reports such a turn in the chat instead. Otherwise commit
// does nothing. The group's lock is held while do runs (the lock is always
// taken before a transaction), so the cursor stored is the one of the turn in
// flight.
func (x *Runner) Action(ctx context.Context, grp *Group, folder store.Folder, do func(commit func(ctx context.Context, tx *store.Tx) error) bool) {
	noop := func(context.Context, *store.Tx) error { return nil }
	if grp == nil {
		do(noop)
		return
	}
	grp.Lock()
	defer grp.Unlock()
	run := grp.run
	// A run whose turn failed for good stores no cursor any more: its
	// messages run again from the last stored one.
	if run == nil || run.Kind != groupqueue.KindMessages || run.broken != nil {
		do(noop)
		return
	}
	cursor := run.settled
	stored := false
	ok := do(func(ctx context.Context, tx *store.Tx) error {
		if err := tx.SetCursor(ctx, folder, cursor); err != nil {
			return err
		}
		stored = true
		return nil
	})
	switch {
	case ok && stored:
		grp.persisted = cursor
		run.acted = true
	case stored:
		// The transaction failed after the cursor was written, or the
		// action was undone (a group whose directories could not be
		// made): the stored cursor is put back.
		if err := x.Store.SetCursor(context.WithoutCancel(ctx), folder, grp.persisted); err != nil {
			x.Log.Error().Err(err).Str("group", string(folder)).Msg("cannot put back the cursor after an undone agent action")
		}
	}
}
