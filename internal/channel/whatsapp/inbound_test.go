package whatsapp

import (
	"errors"
	"strings"
	"testing"

	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"
)

func TestMessageShapes(t *testing.T) {
	text := func(s string) *waE2E.Message { return &waE2E.Message{Conversation: proto.String(s)} }
	fromMe := func(id string) types.MessageInfo {
		return types.MessageInfo{
			MessageSource: types.MessageSource{Chat: familyChat, Sender: botPN, IsGroup: true, IsFromMe: true},
			ID:            id, PushName: "Owner",
		}
	}
	tests := []struct {
		name       string
		info       types.MessageInfo
		raw        *waE2E.Message
		stored     bool
		text       string
		sender     string
		senderName string
		fromMe     bool
		isBot      bool
	}{
		{name: "conversation", info: groupInfo("A1", alicePN), raw: text("@Andy what's on today?"),
			stored: true, text: "@Andy what's on today?", sender: alicePN.String(), senderName: "Alice"},
		{name: "extended text with quoted reply and mention",
			info: groupInfo("A2", alicePN),
			raw: &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text: proto.String("@491700000003 agrees with this"),
				ContextInfo: &waE2E.ContextInfo{
					StanzaID:      proto.String("Q1"),
					Participant:   proto.String(alicePN.String()),
					QuotedMessage: text("dinner at 8?"),
					MentionedJID:  []string{bobPN.String()},
				},
			}},
			stored: true, text: "@491700000003 agrees with this\n[in reply to Alice Contact: \"dinner at 8?\"]",
			sender: alicePN.String(), senderName: "Alice"},
		{name: "reply to the bot", info: groupInfo("A3", alicePN),
			raw: &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text: proto.String("thanks"),
				ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("Q2"), Participant: proto.String(botLID.String()),
					QuotedMessage: text("It is sunny.")},
			}},
			stored: true, text: "thanks\n[in reply to Andy: \"It is sunny.\"]", sender: alicePN.String(), senderName: "Alice"},
		{name: "image with caption", info: groupInfo("A4", alicePN),
			raw:    &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: proto.String("@Andy what is this?"), Mimetype: proto.String("image/jpeg")}},
			stored: true, text: "@Andy what is this?\n[image: downloading]", sender: alicePN.String(), senderName: "Alice"},
		{name: "image without caption", info: groupInfo("A5", alicePN),
			raw:    &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Mimetype: proto.String("image/jpeg")}},
			stored: true, text: "[image: downloading]", sender: alicePN.String(), senderName: "Alice"},
		{name: "video with caption", info: groupInfo("A6", alicePN),
			raw:    &waE2E.Message{VideoMessage: &waE2E.VideoMessage{Caption: proto.String("look")}},
			stored: true, text: "look\n[video]", sender: alicePN.String(), senderName: "Alice"},
		{name: "video note", info: groupInfo("A7", alicePN),
			raw:    &waE2E.Message{PtvMessage: &waE2E.VideoMessage{}},
			stored: true, text: "[video note]", sender: alicePN.String(), senderName: "Alice"},
		{name: "ephemeral wrapper", info: groupInfo("A8", alicePN),
			raw:    &waE2E.Message{EphemeralMessage: &waE2E.FutureProofMessage{Message: text("disappearing hello")}},
			stored: true, text: "disappearing hello", sender: alicePN.String(), senderName: "Alice"},
		{name: "view-once image", info: groupInfo("A9", alicePN),
			raw: &waE2E.Message{ViewOnceMessageV2: &waE2E.FutureProofMessage{Message: &waE2E.Message{
				ImageMessage: &waE2E.ImageMessage{Caption: proto.String("only once")}}}},
			stored: true, text: "only once\n[image: downloading]", sender: alicePN.String(), senderName: "Alice"},
		{name: "edited message", info: groupInfo("A10", alicePN),
			raw: &waE2E.Message{EditedMessage: &waE2E.FutureProofMessage{Message: &waE2E.Message{
				ProtocolMessage: &waE2E.ProtocolMessage{
					Type:          waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(),
					Key:           &waCommon.MessageKey{ID: proto.String("A1")},
					EditedMessage: text("@Andy what's on tomorrow?"),
				}}}},
			stored: true, text: "@Andy what's on tomorrow?", sender: alicePN.String(), senderName: "Alice"},
		{name: "document with caption", info: groupInfo("A11", alicePN),
			raw: &waE2E.Message{DocumentWithCaptionMessage: &waE2E.FutureProofMessage{Message: &waE2E.Message{
				DocumentMessage: &waE2E.DocumentMessage{Caption: proto.String("the contract"), FileName: proto.String("contract.pdf"),
					Mimetype: proto.String("application/pdf")}}}},
			stored: true, text: "the contract\n[document \"contract.pdf\": downloading]", sender: alicePN.String(), senderName: "Alice"},
		{name: "voice note", info: groupInfo("A12", alicePN),
			raw:    &waE2E.Message{AudioMessage: &waE2E.AudioMessage{PTT: proto.Bool(true), Seconds: proto.Uint32(12)}},
			stored: true, text: "[voice note: downloading]", sender: alicePN.String(), senderName: "Alice"},
		{name: "audio file", info: groupInfo("A13", alicePN),
			raw:    &waE2E.Message{AudioMessage: &waE2E.AudioMessage{}},
			stored: true, text: "[audio]", sender: alicePN.String(), senderName: "Alice"},
		{name: "sticker", info: groupInfo("A14", alicePN),
			raw:    &waE2E.Message{StickerMessage: &waE2E.StickerMessage{}},
			stored: true, text: "[sticker]", sender: alicePN.String(), senderName: "Alice"},
		{name: "location", info: groupInfo("A15", alicePN),
			raw: &waE2E.Message{LocationMessage: &waE2E.LocationMessage{DegreesLatitude: proto.Float64(52.5163),
				DegreesLongitude: proto.Float64(13.3777), Name: proto.String("Brandenburger Tor")}},
			stored: true, text: "[location: 52.51630, 13.37770 (Brandenburger Tor)]", sender: alicePN.String(), senderName: "Alice"},
		{name: "contact", info: groupInfo("A16", alicePN),
			raw:    &waE2E.Message{ContactMessage: &waE2E.ContactMessage{DisplayName: proto.String("Bob Builder")}},
			stored: true, text: "[contact: Bob Builder]", sender: alicePN.String(), senderName: "Alice"},
		{name: "contacts", info: groupInfo("A17", alicePN),
			raw: &waE2E.Message{ContactsArrayMessage: &waE2E.ContactsArrayMessage{Contacts: []*waE2E.ContactMessage{
				{DisplayName: proto.String("Bob")}, {DisplayName: proto.String("Carol")}}}},
			stored: true, text: "[contacts: Bob, Carol]", sender: alicePN.String(), senderName: "Alice"},
		{name: "poll", info: groupInfo("A18", alicePN),
			raw: &waE2E.Message{PollCreationMessageV3: &waE2E.PollCreationMessage{Name: proto.String("Lunch?"),
				Options: []*waE2E.PollCreationMessage_Option{{OptionName: proto.String("pizza")}, {OptionName: proto.String("sushi")}}}},
			stored: true, text: "[poll: Lunch? (options: pizza / sushi)]", sender: alicePN.String(), senderName: "Alice"},
		{name: "revoke is not a prompt", info: groupInfo("A20", alicePN),
			raw: &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum(),
				Key: &waCommon.MessageKey{ID: proto.String("A1")}}}},
		{name: "protocol message is not a prompt", info: groupInfo("A21", alicePN),
			raw: &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_EPHEMERAL_SETTING.Enum()}}},
		{name: "poll vote is not a prompt", info: groupInfo("A22", alicePN),
			raw: &waE2E.Message{PollUpdateMessage: &waE2E.PollUpdateMessage{}}},
		{name: "empty text is not a prompt", info: groupInfo("A23", alicePN), raw: text("   ")},
		{name: "own message the outbox sent", info: fromMe("3EB0AAAAAAAAAAAAAAAA"), raw: text("Andy: It is sunny."),
			stored: true, text: "Andy: It is sunny.", sender: botPN.String(), senderName: "Andy", fromMe: true, isBot: true},
		{name: "owner typing on the shared phone", info: fromMe("3A0000000000000000B1"), raw: text("@Andy remind me at 5"),
			stored: true, text: "@Andy remind me at 5", sender: botPN.String(), senderName: "Owner", fromMe: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			tc.rec.own[familyChat.String()+"/3EB0AAAAAAAAAAAAAAAA"] = true
			if ok := tc.handleEvent(msgEvent(tt.info, tt.raw)); !ok {
				t.Fatalf("handleEvent = false; want true (acknowledged)")
			}
			got := tc.rec.stored()
			if !tt.stored {
				if len(got) != 0 {
					t.Fatalf("stored %d messages (%q); want none", len(got), got[0].Text)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("stored %d messages; want 1", len(got))
			}
			m := got[0]
			if m.Text != tt.text {
				t.Errorf("text = %q; want %q", m.Text, tt.text)
			}
			if m.Sender != tt.sender {
				t.Errorf("sender = %q; want %q", m.Sender, tt.sender)
			}
			if m.SenderName != tt.senderName {
				t.Errorf("sender name = %q; want %q", m.SenderName, tt.senderName)
			}
			if m.FromMe != tt.fromMe || m.IsBot != tt.isBot {
				t.Errorf("from me, is bot = %v, %v; want %v, %v", m.FromMe, m.IsBot, tt.fromMe, tt.isBot)
			}
			if m.Chat != familyChat.String() || !m.IsGroup || m.ExternalID != tt.info.ID || !m.SentAt.Equal(msgTime) {
				t.Errorf("chat, group, id, time = %q, %v, %q, %v; want %q, true, %q, %v",
					m.Chat, m.IsGroup, m.ExternalID, m.SentAt, familyChat, tt.info.ID, msgTime)
			}
		})
	}
}

func TestUnregisteredChatKeepsMetadataOnly(t *testing.T) {
	tc := newTestClient(t, nil)
	info := groupInfo("B1", alicePN)
	info.Chat = otherChat
	if !tc.handleEvent(msgEvent(info, &waE2E.Message{Conversation: proto.String("secret plans")})) {
		t.Fatal("handleEvent = false; want true")
	}
	if got := tc.rec.stored(); len(got) != 0 {
		t.Errorf("stored %d messages from an unregistered chat; want 0", len(got))
	}
	if got, want := tc.rec.seen(), []string{otherChat.String() + "||group"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("chats seen = %q; want %q", got, want)
	}

	dm := types.MessageInfo{MessageSource: types.MessageSource{Chat: bobPN, Sender: bobPN}, ID: "B2", PushName: "Bob"}
	tc.handleEvent(msgEvent(dm, &waE2E.Message{Conversation: proto.String("hi")}))
	if got := tc.rec.seen(); len(got) != 2 || got[1] != bobPN.String()+"|Bob|dm" {
		t.Errorf("chats seen = %q; want the DM recorded with Bob's name", got)
	}
}

func TestStatusBroadcastIgnored(t *testing.T) {
	tc := newTestClient(t, nil)
	info := types.MessageInfo{MessageSource: types.MessageSource{Chat: types.StatusBroadcastJID, Sender: alicePN, IsGroup: true}, ID: "S1"}
	if !tc.handleEvent(msgEvent(info, &waE2E.Message{Conversation: proto.String("my status")})) {
		t.Fatal("handleEvent = false; want true")
	}
	if got := tc.rec.seen(); len(got) != 0 {
		t.Errorf("chats seen = %q; want status updates ignored", got)
	}
}

func TestFailedCommitIsNotAcknowledged(t *testing.T) {
	tests := []struct {
		name       string
		chat       types.JID
		inboundErr error
		chatErr    error
		panic      bool
	}{
		{name: "inbound fails", chat: familyChat, inboundErr: errors.New("database is locked")},
		{name: "chat metadata fails", chat: otherChat, chatErr: errors.New("disk full")},
		{name: "inbound panics", chat: familyChat, panic: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			tc.rec.inboundErr, tc.rec.chatErr, tc.rec.panics = tt.inboundErr, tt.chatErr, tt.panic
			info := groupInfo("C1", alicePN)
			info.Chat = tt.chat
			evt := msgEvent(info, &waE2E.Message{Conversation: proto.String("@Andy hi")})
			if tc.handleEvent(evt) {
				t.Fatal("handleEvent = true; want false so whatsmeow does not acknowledge")
			}
			if !tt.panic {
				// Redelivery after the store recovered is stored (the unique key
				// in the store makes a second delivery harmless).
				tc.rec.inboundErr, tc.rec.chatErr = nil, nil
				if !tc.handleEvent(evt) {
					t.Fatal("redelivery: handleEvent = false; want true")
				}
				if got := tc.rec.seen(); len(got) != 1 || !strings.HasPrefix(got[0], tt.chat.String()+"|") {
					t.Errorf("after redelivery chats written %q; want %s once", got, tt.chat)
				}
				if tt.chat == familyChat {
					if got := tc.rec.stored(); len(got) != 1 || got[0].ExternalID != "C1" {
						t.Errorf("after redelivery stored %v; want message C1 once", got)
					}
				}
			}
		})
	}
}

func TestMessageTextNeverLoggedAboveDebug(t *testing.T) {
	tc := newTestClient(t, nil)
	tc.rec.inboundErr = errors.New("database is locked")
	tc.handleEvent(msgEvent(groupInfo("D1", alicePN), &waE2E.Message{Conversation: proto.String("my bank PIN is 1234")}))
	for _, line := range strings.Split(tc.logs.String(), "\n") {
		if strings.Contains(line, "1234") && !strings.Contains(line, `"level":"debug"`) {
			t.Errorf("message text logged above debug: %s", line)
		}
	}
	if !strings.Contains(tc.logs.String(), "WhatsApp will redeliver") {
		t.Errorf("logs = %s; want the failed commit reported", tc.logs.String())
	}
}

func TestHousekeepingIsNotChatActivity(t *testing.T) {
	tests := []struct {
		name string
		msg  *waE2E.Message
		seen bool
	}{
		{name: "key distribution alone", msg: &waE2E.Message{
			SenderKeyDistributionMessage: &waE2E.SenderKeyDistributionMessage{GroupID: proto.String(familyChat.String())},
			MessageContextInfo:           &waE2E.MessageContextInfo{}}},
		{name: "revoke", msg: &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum()}}},
		{name: "key distribution with text", seen: true, msg: &waE2E.Message{
			SenderKeyDistributionMessage: &waE2E.SenderKeyDistributionMessage{GroupID: proto.String(familyChat.String())},
			Conversation:                 proto.String("hi")}},
		{name: "reaction", seen: true, msg: &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String("👍")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			tc.handleEvent(msgEvent(groupInfo("H1", alicePN), tt.msg))
			if got := len(tc.rec.seen()) == 1; got != tt.seen {
				t.Errorf("chat recorded = %v; want %v", got, tt.seen)
			}
		})
	}
}

// Every message writes its chat once: through Inbound (which stores the
// message and its chat in one commit) for a message of a registered chat,
// through ChatSeen for anything else.
func TestOneChatWritePerMessage(t *testing.T) {
	text := &waE2E.Message{Conversation: proto.String("@Andy hi")}
	reaction := &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String("👍")}}
	inOther := groupInfo("O1", alicePN)
	inOther.Chat = otherChat
	dm := types.MessageInfo{MessageSource: types.MessageSource{Chat: alicePN, Sender: alicePN}, ID: "D1", PushName: "Alice"}
	strangerDM := types.MessageInfo{MessageSource: types.MessageSource{Chat: bobPN, Sender: bobPN}, ID: "D2", PushName: "Bob"}
	tests := []struct {
		name   string
		info   types.MessageInfo
		msg    *waE2E.Message
		stored bool
	}{
		{"registered group, text", groupInfo("G1", alicePN), text, true},
		{"registered group, reaction (handed on as a reaction)", groupInfo("G2", alicePN), reaction, true},
		{"registered direct chat", dm, text, true},
		{"unregistered group", inOther, text, false},
		{"unregistered direct chat", strangerDM, text, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			if !tc.handleEvent(msgEvent(tt.info, tt.msg)) {
				t.Fatal("handleEvent = false; want true")
			}
			if got := tc.rec.seen(); len(got) != 1 || !strings.HasPrefix(got[0], tt.info.Chat.String()+"|") {
				t.Errorf("chat writes = %q; want exactly one, for %s", got, tt.info.Chat)
			}
			if got := len(tc.rec.stored()) == 1; got != tt.stored {
				t.Errorf("message stored = %v; want %v", got, tt.stored)
			}
		})
	}
}
