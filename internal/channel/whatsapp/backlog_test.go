package whatsapp

import (
	"fmt"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/proto/waHistorySync"
	"go.mau.fi/whatsmeow/proto/waWeb"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"
)

// historyFake parses history-sync messages with whatsmeow's own parser.
type historyFake struct {
	*fakeWA
	parser *whatsmeow.Client
}

func (f historyFake) ParseWebMessage(chat types.JID, msg *waWeb.WebMessageInfo) (*events.Message, error) {
	return f.parser.ParseWebMessage(chat, msg)
}

func webMsg(id string, sender types.JID, at time.Time, text string) *waHistorySync.HistorySyncMsg {
	return &waHistorySync.HistorySyncMsg{Message: &waWeb.WebMessageInfo{
		Key:              &waCommon.MessageKey{RemoteJID: proto.String(familyChat.String()), FromMe: proto.Bool(false), ID: proto.String(id), Participant: proto.String(sender.String())},
		MessageTimestamp: proto.Uint64(uint64(at.Unix())),
		PushName:         proto.String("Alice"),
		Message:          &waE2E.Message{Conversation: proto.String(text)},
	}}
}

// History sync (as after a re-pairing) stores a registered chat's recent
// messages with their own, old time, oldest first and bounded; other chats
// are left alone.
func TestHistorySyncKeepsRegisteredChatsAsContext(t *testing.T) {
	old := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		n     int // messages in the family conversation, newest first
		want  int
		first string // the oldest one kept
	}{
		{name: "a few messages", n: 3, want: 3, first: "H0"},
		{name: "bounded to the newest", n: HistorySyncMaxPerChat + 5, want: HistorySyncMaxPerChat, first: "H5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			tc.Client.wa = historyFake{fakeWA: tc.wa, parser: &whatsmeow.Client{}}
			family := &waHistorySync.Conversation{ID: proto.String(familyChat.String())}
			for i := tt.n - 1; i >= 0; i-- { // whatsmeow's blobs list the newest first
				family.Messages = append(family.Messages, webMsg(fmt.Sprintf("H%d", i), aliceLID, old.Add(time.Duration(i)*time.Minute), "@Andy are you there?"))
			}
			other := &waHistorySync.Conversation{ID: proto.String(otherChat.String()), Messages: []*waHistorySync.HistorySyncMsg{webMsg("O1", alicePN, old, "@Andy hi")}}
			evt := &events.HistorySync{Data: &waHistorySync.HistorySync{
				SyncType:      waHistorySync.HistorySync_RECENT.Enum(),
				Conversations: []*waHistorySync.Conversation{other, family},
			}}
			if !tc.handleEvent(evt) {
				t.Fatalf("history sync not acknowledged")
			}
			got := tc.rec.stored()
			if len(got) != tt.want {
				t.Fatalf("stored %d messages; want %d", len(got), tt.want)
			}
			if got[0].ExternalID != tt.first || got[0].Chat != familyChat.String() || got[0].Sender != alicePN.String() {
				t.Errorf("first stored: %+v; want %s in the family chat from %s", got[0], tt.first, alicePN)
			}
			for i, m := range got {
				if i > 0 && !m.SentAt.After(got[i-1].SentAt) {
					t.Fatalf("stored out of order: %s before %s", got[i-1].ExternalID, m.ExternalID)
				}
				if m.SentAt.Before(old) || m.SentAt.After(old.Add(time.Duration(tt.n)*time.Minute)) {
					t.Errorf("%s sent at %v; want its own time from the blob", m.ExternalID, m.SentAt)
				}
			}
			if !tc.PhoneLastSeen().IsZero() {
				t.Errorf("history counted as the phone being online at %v", tc.PhoneLastSeen())
			}
		})
	}
}
