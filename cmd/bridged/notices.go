package main

import (
	"context"
	"fmt"

	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/store"
)

// notices posts the owner's alerts (alerts.Poster) without the router: a
// notice is committed to the outbox and the router's sender woken through
// the signal it waits on, as the router's SendMessage does for a message
// that is not an agent's; a rescan goes to the ingest, which wakes the
// router's message loop. Both are built before the alerts and the router.
type notices struct {
	outboxPoster
	in *ingest.Ingest
}

// outboxPoster commits bridged's own messages to the outbox and wakes the
// router's sender through the signal it waits on (approvals.Poster); it
// needs neither the router nor the ingest.
type outboxPoster struct {
	db  *store.DB
	out *outbox.Signal
}

// SendMessage commits text to chat's outbox and wakes the sender. As in
// the router's SendMessage, <internal>…</internal> blocks are removed first
// and a text left empty is refused.
func (n outboxPoster) SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	if text = prompt.StripInternal(text); text == "" {
		return store.OutboxItem{}, router.ErrEmpty
	}
	it, err := n.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(chat), Group: store.Folder(folder), Text: text, Origin: origin})
	if err != nil {
		return store.OutboxItem{}, fmt.Errorf("send message to %s: %w", chat, err)
	}
	n.out.Wake()
	return it, nil
}

// Rescan has every group's pending messages looked at again.
func (n notices) Rescan() { n.in.Rescan() }
