package whatsapp

import (
	"context"
	"errors"
	"testing"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// dbSink is a Sink over bridged's real store, as the router's is.
type dbSink struct{ db *bridgedstore.DB }

func (s dbSink) Inbound(ctx context.Context, _ ingest.Changed, m channel.Message) (bridgedstore.MessageID, error) {
	id, _, err := s.db.Messages.Insert(ctx, bridgedstore.Message{Chat: bridgedstore.ChatID(m.Chat), ExternalID: m.ExternalID,
		Sender: m.Sender, SenderName: m.SenderName, Text: m.Text, SentAt: m.SentAt, FromMe: m.FromMe, IsBot: m.IsBot, Mentioned: m.Mentioned})
	return id, err
}

func (s dbSink) ChatSeen(ctx context.Context, chat, name string, isGroup bool) error {
	return s.db.Chats.Upsert(ctx, bridgedstore.Chat{ID: bridgedstore.ChatID(chat), Name: name, IsGroup: isGroup})
}

func (s dbSink) Lookup(ctx context.Context, chat string) (ingest.Changed, error) {
	_, err := s.db.Groups.ByChat(ctx, bridgedstore.ChatID(chat))
	if err != nil && !errors.Is(err, bridgedstore.ErrNotFound) {
		return ingest.Changed{}, err
	}
	return ingest.Changed{Known: true, Registered: err == nil}, nil
}

func (s dbSink) IsOwnMessage(context.Context, string, string) bool { return false }

// lidFake adds the reverse LID lookup to fakeWA.
type lidFake struct{ *fakeWA }

func (f lidFake) LIDForPN(_ context.Context, pn types.JID) (types.JID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for lid, p := range f.lidToPN {
		if p == pn.ToNonAD() {
			return lid, nil
		}
	}
	return types.EmptyJID, nil
}

// newStoreClient is a connected client whose sink is a real store with one
// registered direct chat, registered under chat.
func newStoreClient(t *testing.T, chat types.JID) (*testClient, *bridgedstore.DB) {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t)
	if _, err := db.Groups.Add(ctx, bridgedstore.Group{Chat: bridgedstore.ChatID(chat.String()), Name: "Alice", Folder: "alice"}); err != nil {
		t.Fatal(err)
	}
	tc := newTestClient(t, nil)
	tc.Client.wa = lidFake{tc.wa}
	tc.sink = dbSink{db}
	tc.conn.setState(channel.StateConnected, "")
	return tc, db
}

// The same person writes to the bot first by phone number, then (after
// WhatsApp's switch) by LID, in every way whatsmeow reports it; the bot's
// reply goes to the registered id. registered is the id the chat was
// registered under.
func TestRegisteredDirectChatAcrossTheLIDSwitch(t *testing.T) {
	addressed := []struct {
		name string
		src  types.MessageSource
	}{
		{"by phone number", types.MessageSource{Chat: alicePN, Sender: alicePN, SenderAlt: aliceLID}},
		{"by LID, number alongside", types.MessageSource{Chat: aliceLID, Sender: aliceLID, SenderAlt: alicePN, AddressingMode: types.AddressingModeLID}},
		{"by LID, number from the LID map", types.MessageSource{Chat: aliceLID, Sender: types.JID{User: aliceLID.User, Device: 2, Server: types.HiddenUserServer}}},
		{"own message from the phone, by LID", types.MessageSource{Chat: aliceLID, Sender: botLID, IsFromMe: true, RecipientAlt: alicePN}},
	}
	for _, registered := range []types.JID{alicePN, aliceLID} {
		t.Run("registered by "+registered.Server, func(t *testing.T) {
			tc, db := newStoreClient(t, registered)
			for i, a := range addressed {
				id := "LS" + string(rune('0'+i))
				if !tc.handleEvent(msgEvent(types.MessageInfo{MessageSource: a.src, ID: id, PushName: "Alice"},
					&waE2E.Message{Conversation: proto.String(a.name)})) {
					t.Fatalf("%s: not acknowledged", a.name)
				}
			}
			ctx := context.Background()
			msgs, err := db.Messages.After(ctx, bridgedstore.ChatID(registered.String()), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != len(addressed) {
				t.Fatalf("stored %d messages in %s; want all %d, however WhatsApp addressed the chat", len(msgs), registered, len(addressed))
			}
			for _, m := range msgs[:3] {
				if m.Sender != alicePN.String() {
					t.Errorf("%q: sender %q; want %q (one sender, whatever the addressing)", m.Text, m.Sender, alicePN)
				}
			}
			other := aliceLID
			if registered == aliceLID {
				other = alicePN
			}
			if stray, _ := db.Messages.After(ctx, bridgedstore.ChatID(other.String()), 0, 0); len(stray) != 0 {
				t.Errorf("stored %d messages under %s; want none outside the registered chat", len(stray), other)
			}
			if _, err := tc.Send(ctx, channel.Outgoing{Chat: registered.String(), Text: "hello", ID: NewMessageID()}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if sent := tc.wa.sentMessages(); len(sent) != 1 || sent[0].to != registered {
				t.Errorf("sent to %v; want %s (whatsmeow encrypts to the LID session itself)", sent, registered)
			}
		})
	}
}

// A mention of the bot by a LID the account does not know as its own yet
// counts when whatsmeow's LID map links it to the bot's number.
func TestMentionOfTheBotByLIDThroughTheLIDMap(t *testing.T) {
	tc := newTestClient(t, nil)
	tc.wa.lid = types.EmptyJID
	tc.wa.lidToPN[botLID] = botPN
	info := groupInfo("ML1", aliceLID)
	info.AddressingMode = types.AddressingModeLID
	tc.handleEvent(msgEvent(info, &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("@" + botLID.User + " hi"), ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{botLID.String()}},
	}}))
	got := tc.rec.stored()
	if len(got) != 1 || !got[0].Mentioned || got[0].Text != "@Andy hi" {
		t.Fatalf("stored %+v; want one message mentioning the bot, rewritten to @Andy", got)
	}
}
