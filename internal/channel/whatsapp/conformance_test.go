package whatsapp

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/ingest"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
)

// rigSink delivers to the conformance rig's ingest and store, as the
// daemon's sink does.
type rigSink struct{ rig *channeltest.Rig }

func (s rigSink) Lookup(ctx context.Context, chat string) (ingest.Changed, error) {
	return s.rig.Ingest.Lookup(ctx, chat)
}

func (s rigSink) Inbound(ctx context.Context, seen ingest.Changed, m channel.Message) (bridgedstore.MessageID, error) {
	return s.rig.Ingest.InboundSeen(ctx, seen, m)
}

func (s rigSink) ChatSeen(ctx context.Context, chat, name string, isGroup bool) error {
	return s.rig.DB.Chats.Upsert(ctx, bridgedstore.Chat{ID: bridgedstore.ChatID(chat), Name: name, Channel: ChannelName, IsGroup: isGroup, LastActivity: time.Now()})
}

func (s rigSink) IsOwnMessage(ctx context.Context, chat, id string) bool {
	own, err := s.rig.DB.Outbox.IsOwn(ctx, bridgedstore.ChatID(chat), id)
	return err == nil && own
}

// The channel conformance suite against the fake whatsmeow client.
func TestConformance(t *testing.T) {
	channeltest.Conform(t, ChannelName, func(t *testing.T, rig *channeltest.Rig) channeltest.Network {
		tc := connectedClient(t, func(o *Options) { o.Sink = rigSink{rig}; o.SharedNumber = false })
		return &waNetwork{tc: tc}
	})
}

type waNetwork struct {
	tc *testClient
	n  atomic.Int64
}

func (n *waNetwork) Channel() channel.Channel { return n.tc.Client }
func (n *waNetwork) Chat() string             { return familyChat.String() }
func (n *waNetwork) Mentions() []string       { return []string{"number", "lid"} }
func (n *waNetwork) MaxText() int             { return MaxMessageRunes }

func (n *waNetwork) SenderID(who channeltest.Who) string {
	if who == channeltest.Owner {
		return botPN.String()
	}
	return bobPN.String()
}

// Deliver dispatches the message's event as whatsmeow would; the ack is
// the handler's success, which whatsmeow waits for before it acks.
func (n *waNetwork) Deliver(who channeltest.Who, text, mention string) func() bool {
	info := groupInfo(fmt.Sprintf("C%d", n.n.Add(1)), bobPN)
	info.Timestamp = time.Now()
	if who == channeltest.Owner {
		info.Sender, info.IsFromMe = botPN, true
	}
	raw := &waE2E.Message{Conversation: proto.String(text)}
	switch mention {
	case "number", "lid":
		jid := botPN
		if mention == "lid" {
			jid = botLID
		}
		raw = &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
			Text:        proto.String(text + " @" + jid.User),
			ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{jid.String()}},
		}}
	}
	var acked atomic.Bool
	go func() { acked.Store(n.tc.handleEvent(msgEvent(info, raw))) }()
	return acked.Load
}

// Echo: WhatsApp shows the account's own messages, the bot's included.
func (n *waNetwork) Echo(sentID, text string) {
	info := types.MessageInfo{MessageSource: types.MessageSource{Chat: familyChat, Sender: botPN, IsGroup: true, IsFromMe: true}, ID: sentID, Timestamp: time.Now()}
	n.tc.handleEvent(msgEvent(info, &waE2E.Message{Conversation: proto.String(text)}))
}

func (n *waNetwork) Received() []string {
	var out []string
	for _, s := range n.tc.wa.sentMessages() {
		out = append(out, s.text)
	}
	return out
}

func (n *waNetwork) Typing() bool {
	for _, p := range n.tc.wa.presenceLog() {
		if strings.HasPrefix(p, string(types.ChatPresenceComposing)) {
			return true
		}
	}
	return false
}

var _ channeltest.MediaNetwork = (*waNetwork)(nil)

// Fetcher is the client: it downloads a message's file.
func (n *waNetwork) Fetcher() channeltest.Fetcher { return n.tc.Client }

// DeliverFile dispatches an image message whose download writes data.
func (n *waNetwork) DeliverFile(who channeltest.Who, caption string, data []byte) func() bool {
	n.tc.wa.mu.Lock()
	n.tc.wa.download = writeDownload(data)
	n.tc.wa.mu.Unlock()
	info := groupInfo(fmt.Sprintf("F%d", n.n.Add(1)), bobPN)
	info.Timestamp = time.Now()
	if who == channeltest.Owner {
		info.Sender, info.IsFromMe = botPN, true
	}
	var acked atomic.Bool
	go func() { acked.Store(n.tc.handleEvent(msgEvent(info, imageMessage(caption, uint64(len(data)))))) }()
	return acked.Load
}

func (n *waNetwork) ReceivedFiles() [][]byte {
	var out [][]byte
	for _, u := range n.tc.wa.uploaded() {
		out = append(out, u.data)
	}
	return out
}
