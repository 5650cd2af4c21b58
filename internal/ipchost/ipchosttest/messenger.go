// Package ipchosttest holds what tests of the IPC host's users share: the
// router's part the host needs, without a router.
package ipchosttest

import (
	"context"

	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/store"
)

// Outbox is the router's part the IPC host needs: a tool's message
// committed to the outbox with the request's unit of work, as the router
// commits it, and no turn in flight to hold.
type Outbox struct{ DB *store.DB }

var _ ipchost.Messenger = Outbox{}

// SendMessage enqueues text for chat and applies unit in the same
// transaction.
func (m Outbox) SendMessage(ctx context.Context, unit store.Unit, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	var stored store.OutboxItem
	err := m.DB.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if stored, err = tx.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(chat), Group: store.Folder(folder), Text: text, Origin: origin}); err != nil || unit == nil {
			return err
		}
		return unit.Apply(ctx, tx, stored)
	})
	return stored, err
}

// HoldTurn holds nothing.
func (Outbox) HoldTurn(context.Context, string) ipchost.TurnHold { return noHold{} }

type noHold struct{}

func (noHold) Apply(context.Context, *store.Tx) error { return nil }
func (noHold) Release(context.Context, bool)          {}
