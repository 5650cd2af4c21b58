package agentrun

import (
	"context"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/store"
)

// Send commits item to the outbox and, when unit is not nil, applies unit in
// the same transaction right after the insert, with the stored row (the IPC
// host's record of the request that sent it). When grp (nil: none) has a live message
// run for item's chat whose turns have not failed, the message counts as a
// reply of that run: the cursor of the messages whose turn has begun is
// stored in the same transaction, and from then on they are not run again.
// It takes the group's lock.
func (x *Runner) Send(ctx context.Context, grp *Group, item store.OutboxItem, unit store.Unit) (store.OutboxItem, error) {
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
		if stored, err = tx.Outbox.Enqueue(ctx, item); err != nil {
			return err
		}
		if unit != nil {
			if err := unit.Apply(ctx, tx, stored); err != nil {
				return err
			}
		}
		if run != nil {
			return tx.Sessions.SetCursor(ctx, item.Group, run.settled)
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

// Hold holds still the turn in flight of grp (nil: none), the group of
// folder, while an action of its agent that changes something other than
// sending a message commits, and returns the turn's part of the action's
// unit of work. The caller applies it (Apply) inside the transaction that
// commits the action and then releases it (Release), always, saying whether
// the action committed.
//
// While grp has a live message run whose turns have not failed, Apply
// stores in that transaction the cursor of the messages handed to the
// agent's turn, exactly as Send does for a message to its own chat: an
// action counts like a reply, so if the turn then fails (or the daemon dies)
// its messages are not run again, which would make the agent act a second
// time; Messages reports such a turn in the chat instead. Otherwise Apply
// does nothing. The group's lock is held from Hold to Release (the lock is
// always taken before a transaction), so the cursor stored is the one of the
// turn in flight.
func (x *Runner) Hold(grp *Group, folder store.Folder) *TurnHold {
	h := &TurnHold{x: x, grp: grp, folder: folder}
	if grp == nil {
		return h
	}
	grp.Lock()
	// A run whose turn failed for good stores no cursor any more: its
	// messages run again from the last stored one.
	if run := grp.run; run != nil && run.Kind == groupqueue.KindMessages && run.broken == nil {
		h.run, h.cursor = run, run.settled
	}
	return h
}

// TurnHold is a group's turn in flight held still while one action of its
// agent commits (see Runner.Hold).
type TurnHold struct {
	x      *Runner
	grp    *Group
	folder store.Folder
	run    *Run            // the live message run whose cursor is stored; nil: none
	cursor store.MessageID // the cursor of the messages handed to its turn
	stored bool            // Apply wrote the cursor (in a transaction that may yet fail)
	done   bool
}

// Apply stores the cursor of the turn in flight, if any, inside tx: the
// transaction that commits the action.
func (h *TurnHold) Apply(ctx context.Context, tx *store.Tx) error {
	if h.run == nil {
		return nil
	}
	if err := tx.Sessions.SetCursor(ctx, h.folder, h.cursor); err != nil {
		return err
	}
	h.stored = true
	return nil
}

// Release lets the turn go on; committed says whether the action
// committed. A cursor stored for an action that did not commit (its
// transaction failed after Apply, or the action was undone) is put back.
// Releasing twice does nothing.
func (h *TurnHold) Release(ctx context.Context, committed bool) {
	if h.done || h.grp == nil {
		return
	}
	h.done = true
	defer h.grp.Unlock()
	switch {
	case committed && h.stored:
		h.grp.persisted = h.cursor
		h.run.acted = true
	case h.stored:
		if err := h.x.Store.Sessions.SetCursor(context.WithoutCancel(ctx), h.folder, h.grp.persisted); err != nil {
			h.x.Log.Error().Err(err).Str("group", string(h.folder)).Msg("cannot put back the cursor after an undone agent action")
		}
	}
}
