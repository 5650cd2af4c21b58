package router

import (
	"context"
	"fmt"
	"time"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/store"
)

// SendMessage commits text to the outbox for chat and wakes the sender. The
// <internal>…</internal> blocks are removed first; when nothing is left it
// returns ErrEmpty and commits nothing. folder is the group the message
// comes from (empty for the daemon's own). A message the group's agent sends
// to its own chat while it handles messages counts as a reply: from then on
// that run's messages are not run again. unit (nil: none) is the IPC
// host's unit of work for the request that sent the message: it is applied
// in the transaction that commits the row, right after the insert.
func (r *Router) SendMessage(ctx context.Context, unit store.Unit, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	text, err := outbox.Sendable(text)
	if err != nil {
		return store.OutboxItem{}, err
	}
	item := store.OutboxItem{Chat: store.ChatID(chat), Group: store.Folder(folder), Text: text, Origin: origin}

	var grp *agentrun.Group
	if folder != "" && origin == store.OriginTool {
		grp = r.runs.Known(item.Group)
	}
	stored, err := r.runs.Send(ctx, grp, item, unit)
	if err != nil {
		return store.OutboxItem{}, fmt.Errorf("send message to %s: %w", chat, err)
	}
	r.out.Wake()
	return stored, nil
}

// newSender builds the router's outbox sender; backoff is the wait after a
// row's first failed send.
func (r *Router) newSender(backoff time.Duration) *outbox.Sender {
	spool := r.home.Spool()
	s, err := outbox.New(outbox.Config{
		Spool:    &spool,
		Store:    r.db,
		Channels: r.channels,
		Log:      r.baseLog,
		Now:      r.now,
		Backoff:  backoff,
		OnSent:   r.sent,
		OnFailed: r.sendFailed,
		Signal:   r.outWake,
	})
	if err != nil {
		panic(err) // the store is checked by New, and backoff is never negative
	}
	return s
}

// sent is called by the sender after a row is marked sent. The owner's
// alerts are told under a context of their own (see alert).
func (r *Router) sent(_ context.Context, it store.OutboxItem) {
	if it.Origin == store.OriginReply {
		r.typingOffAfterReply(it)
	}
	r.alert(func(ctx context.Context, a Alerts) { a.Sent(ctx, it.Chat) })
	if r.onSent != nil {
		r.onSent(it)
	}
}

// typingOffAfterReply hides the typing indicator once a reply is out, unless
// the group's agent is working on another turn.
func (r *Router) typingOffAfterReply(it store.OutboxItem) {
	if it.Group != "" && r.runs.Busy(it.Group) {
		return
	}
	r.out.SetTyping(string(it.Chat), false)
}

// flush waits until the sender has nothing it can send now, or ctx ends.
func (r *Router) flush(ctx context.Context) {
	if !r.out.Flush(ctx) {
		r.log.Warn().Msg("outbox not flushed before the shutdown deadline; pending messages go out at the next start")
	}
}

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
	_, err := r.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: chat, Group: folder, Text: text, Origin: store.OriginNotice})
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
