package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// notice commits a short message from bridged itself to chat. When it
// cannot be committed (the disk is full, say) it is sent once straight
// through the chat's channel, best effort, so the failure it reports is not
// silent too.
func (r *Router) notice(chat store.ChatID, folder store.Folder, text string) {
	if chat == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	_, err := r.db.EnqueueOutbox(ctx, store.OutboxItem{Chat: chat, Group: folder, Text: text, Origin: store.OriginNotice})
	if err == nil {
		r.out.Wake()
		return
	}
	log := r.log.With().Str("chat", string(chat)).Logger()
	log.Error().Err(err).Msg("cannot queue notice; sending it directly")
	ch := r.channelFor(string(chat))
	if ch == nil {
		return
	}
	if _, err := ch.Send(ctx, channel.Outgoing{Chat: string(chat), Text: text, ID: store.NewExternalID()}); err != nil {
		log.Error().Err(err).Msg("cannot send notice")
	}
}
