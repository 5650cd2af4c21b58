package telegram

import (
	"context"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
)

// StoreSink is the Sink of the daemon: messages go to the ingest (stored
// with the update's commit, which wakes the router), chats the bot joined
// or left and updates that carry nothing to the store.
type StoreSink struct {
	In *ingest.Ingest
	DB *store.DB
}

var _ Sink = StoreSink{}

// Inbound stores m with ack (ingest.Ingest.InboundPolled).
func (s StoreSink) Inbound(ctx context.Context, m channel.Message, ack store.PollAck) (store.MessageID, error) {
	return s.In.InboundPolled(ctx, m, ack)
}

// Seen records the chat and commits ack in one transaction.
func (s StoreSink) Seen(ctx context.Context, chat, name string, isGroup bool, ack store.PollAck) error {
	return s.DB.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Polls.Ack(ctx, ack); err != nil {
			return err
		}
		return tx.Chats.Upsert(ctx, store.Chat{ID: store.ChatID(chat), Name: name, Channel: ChannelName, IsGroup: isGroup, LastActivity: time.Now()})
	})
}

// Ack commits ack alone.
func (s StoreSink) Ack(ctx context.Context, ack store.PollAck) error { return s.DB.Polls.Ack(ctx, ack) }

// Next returns the committed offset.
func (s StoreSink) Next(ctx context.Context) (int64, error) { return s.DB.Polls.Next(ctx, ChannelName) }
