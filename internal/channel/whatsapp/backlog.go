package whatsapp

import (
	"context"
	"slices"

	"go.mau.fi/whatsmeow/proto/waWeb"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
)

// Backlogs. Messages that reach bridged long after they were sent come two
// ways: WhatsApp's offline queue after a disconnect (ordinary
// events.Message with their original time) and history sync (blobs the
// phone sends after pairing, notably after a re-pairing that follows a long
// outage; downloaded by bridged, see historysync.go). Both are stored like
// any message of a registered chat, with their original time. The router
// marks one that arrives more than its late window after it was sent as
// late, keeps it as context and lets no trigger among such messages start a
// turn (see internal/router); a history-sync message is marked as backlog
// (channel.Message.Backlog) and so is late whatever its age. From history
// sync only registered chats are taken, oldest first: at most
// HistorySyncMaxChats chats and HistorySyncMaxMessages messages of a blob,
// HistorySyncMaxPerChat of each chat's newest; everything else in the blob
// is left to whatsmeow.

// HistorySyncMaxPerChat bounds the messages taken from one conversation of
// one history-sync blob.
const HistorySyncMaxPerChat = 100

// historyClient parses a history-sync message as whatsmeow does.
type historyClient interface {
	ParseWebMessage(chat types.JID, msg *waWeb.WebMessageInfo) (*events.Message, error)
}

var _ historyClient = realClient{}

// handleSync stores the recent messages of registered chats from a
// history-sync blob. whatsmeow never delivers a blob twice, so a message
// that cannot be stored is logged and the rest are still taken.
func (c *history) handleSync(ctx context.Context, sink Sink, e *events.HistorySync) bool {
	hc, ok := c.wa.(historyClient)
	if !ok || e.Data == nil {
		return true
	}
	stored, failed, chats, skipped := 0, 0, 0, 0
	sink = backlogSink{sink}
	for _, conv := range e.Data.GetConversations() {
		chat, err := types.ParseJID(conv.GetID())
		if err != nil || chat.User == "" {
			continue
		}
		var msgs []*events.Message
		for _, hm := range conv.GetMessages() {
			evt, err := hc.ParseWebMessage(chat, hm.GetMessage())
			if err != nil {
				c.log.Debug().Err(err).Str("chat", chat.String()).Msg("skipping a history-sync message")
				continue
			}
			msgs = append(msgs, evt)
		}
		if len(msgs) == 0 || !c.wanted(ctx, sink, msgs[0]) {
			continue
		}
		if chats >= HistorySyncMaxChats || stored+failed >= HistorySyncMaxMessages {
			skipped++
			continue
		}
		chats++
		slices.SortStableFunc(msgs, func(a, b *events.Message) int { return a.Info.Timestamp.Compare(b.Info.Timestamp) })
		keep := min(HistorySyncMaxPerChat, HistorySyncMaxMessages-stored-failed)
		if len(msgs) > keep {
			msgs = msgs[len(msgs)-keep:]
		}
		for _, m := range msgs {
			if !c.in.handle(ctx, sink, m) {
				failed++
				continue
			}
			stored++
		}
	}
	c.log.Info().Str("type", e.Data.GetSyncType().String()).Int("conversations", len(e.Data.GetConversations())).
		Int("chats", chats).Int("chats_skipped", skipped).Int("messages", stored).Int("failed", failed).
		Msg("history sync: recent messages of registered chats kept as context")
	return true
}

// backlogSink marks every message it stores as backlog: context that never
// starts a turn.
type backlogSink struct{ Sink }

func (s backlogSink) Inbound(ctx context.Context, seen ingest.Changed, m channel.Message) (bridgedstore.MessageID, error) {
	m.Backlog = true
	return s.Sink.Inbound(ctx, seen, m)
}

// wanted reports whether m's conversation is a registered chat. When the
// registry cannot tell, it says yes: storing each message decides again.
func (c *history) wanted(ctx context.Context, sink Sink, m *events.Message) bool {
	chat, ok := c.in.chatOf(ctx, &m.Info)
	if !ok {
		return false
	}
	_, seen, err := c.in.registeredForm(ctx, sink, &m.Info, chat)
	return err != nil || seen.Registered
}
