package whatsapp

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/ingest"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// A WhatsApp message's group is looked up once on its way in, like a local
// message's: the channel asks the registry through the sink's Lookup before
// it builds the message, and the ingest stores it with what Lookup found
// (the router's TestOneGroupLookupPerMessage holds the rest of the walk to
// that one lookup). A message of a chat that is not registered is looked
// up once too, and only its chat is recorded.
func TestOneGroupLookupPerWhatsAppMessage(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	for _, g := range []bridgedstore.Group{
		{Chat: bridgedstore.ChatID(familyChat.String()), Name: "Family", Folder: "main", IsMain: true},
		{Chat: bridgedstore.ChatID(alicePN.String()), Name: "Alice", Folder: "alice"},
	} {
		if _, err := db.Groups.Add(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	in, err := ingest.New(ingest.Config{DB: db, LateWindow: time.Hour, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	tc := newTestClient(t, func(o *Options) { o.Sink = ingestSink{in: in, db: db} })
	tests := []struct {
		name   string
		info   types.MessageInfo
		stored bool
	}{
		{"a registered group", groupInfo("G1", alicePN), true},
		{"a direct chat registered by number, written by its LID", types.MessageInfo{
			MessageSource: types.MessageSource{Chat: aliceLID, Sender: aliceLID, SenderAlt: alicePN}, ID: "D1", PushName: "Alice"}, true},
		{"a group that is not registered", types.MessageInfo{
			MessageSource: types.MessageSource{Chat: otherChat, Sender: alicePN, IsGroup: true}, ID: "O1", PushName: "Alice"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := db.Groups.Lookups()
			if !tc.handleEvent(msgEvent(tt.info, &waE2E.Message{Conversation: proto.String("hello")})) {
				t.Fatal("not acknowledged")
			}
			if got := db.Groups.Lookups() - before; got != 1 {
				t.Errorf("%d group lookups; want 1", got)
			}
			chat := tt.info.Chat
			if chat == aliceLID {
				chat = alicePN
			}
			msgs, err := db.Messages.After(ctx, bridgedstore.ChatID(chat.String()), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if stored := len(msgs) == 1 && msgs[0].ExternalID == tt.info.ID; stored != tt.stored {
				t.Errorf("stored %+v; want stored %v", msgs, tt.stored)
			}
		})
	}
}
