package whatsapp

import (
	"context"
	"testing"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
)

func TestSamePersonAsLIDAndPhoneNumberIsOneSender(t *testing.T) {
	unknownLID := types.NewJID("200000000000009", types.HiddenUserServer)
	tests := []struct {
		name string
		src  types.MessageSource
		want types.JID
	}{
		{name: "phone-number group",
			src:  types.MessageSource{Chat: familyChat, Sender: alicePN, SenderAlt: aliceLID, IsGroup: true},
			want: alicePN},
		{name: "LID group with the number alongside",
			src: types.MessageSource{Chat: familyChat, Sender: aliceLID, SenderAlt: alicePN, IsGroup: true,
				AddressingMode: types.AddressingModeLID},
			want: alicePN},
		{name: "LID group, number from the LID map",
			src: types.MessageSource{Chat: familyChat, Sender: aliceLID, IsGroup: true,
				AddressingMode: types.AddressingModeLID},
			want: alicePN},
		{name: "device suffix dropped",
			src:  types.MessageSource{Chat: familyChat, Sender: types.NewADJID(alicePN.User, 0, 3), IsGroup: true},
			want: alicePN},
		{name: "unknown LID kept",
			src: types.MessageSource{Chat: familyChat, Sender: unknownLID, IsGroup: true,
				AddressingMode: types.AddressingModeLID},
			want: unknownLID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			info := types.MessageInfo{MessageSource: tt.src, ID: "L1", PushName: "Alice"}
			tc.handleEvent(msgEvent(info, &waE2E.Message{Conversation: proto.String("hi")}))
			got := tc.rec.stored()
			if len(got) != 1 {
				t.Fatalf("stored %d messages; want 1", len(got))
			}
			if got[0].Sender != tt.want.String() {
				t.Errorf("sender = %q; want %q", got[0].Sender, tt.want)
			}
		})
	}
}

func TestLIDDirectChatResolvesToPhoneNumber(t *testing.T) {
	tests := []struct {
		name string
		src  types.MessageSource
	}{
		{name: "number alongside", src: types.MessageSource{Chat: aliceLID, Sender: aliceLID, SenderAlt: alicePN}},
		{name: "number from the LID map", src: types.MessageSource{Chat: aliceLID, Sender: aliceLID}},
		{name: "own message from the phone", src: types.MessageSource{Chat: aliceLID, Sender: botLID, IsFromMe: true, RecipientAlt: alicePN}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil) // alicePN is a registered DM
			tc.handleEvent(msgEvent(types.MessageInfo{MessageSource: tt.src, ID: "L2"}, &waE2E.Message{Conversation: proto.String("hi")}))
			got := tc.rec.stored()
			if len(got) != 1 {
				t.Fatalf("stored %d messages; want 1 in the registered DM %s", len(got), alicePN)
			}
			if got[0].Chat != alicePN.String() || got[0].IsGroup {
				t.Errorf("chat = %q (group %v); want %q", got[0].Chat, got[0].IsGroup, alicePN)
			}
		})
	}
}

func TestMentions(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		mentioned []string
		want      bool
		wantText  string
	}{
		{name: "bot LID", text: "@" + botLID.User + " what's on today?", mentioned: []string{botLID.String()},
			want: true, wantText: "@Andy what's on today?"},
		{name: "bot number", text: "@" + botPN.User + " hi", mentioned: []string{botPN.String()},
			want: true, wantText: "@Andy hi"},
		{name: "bot LID with device", text: "@" + botLID.User + " hi", mentioned: []string{types.JID{User: botLID.User, Device: 5, Server: types.HiddenUserServer}.String()},
			want: true, wantText: "@Andy hi"},
		{name: "someone else by LID", text: "ask @" + aliceLID.User, mentioned: []string{aliceLID.String()},
			want: false, wantText: "ask @Alice Contact"},
		{name: "no mention", text: "@Andy plain text trigger", want: false, wantText: "@Andy plain text trigger"},
		{name: "longer number is not the bot", text: "@" + botPN.User + "9 hi", mentioned: []string{botPN.String()},
			want: true, wantText: "@" + botPN.User + "9 hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			info := groupInfo("M1", aliceLID)
			info.AddressingMode = types.AddressingModeLID
			tc.handleEvent(msgEvent(info, &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text: proto.String(tt.text), ContextInfo: &waE2E.ContextInfo{MentionedJID: tt.mentioned},
			}}))
			got := tc.rec.stored()
			if len(got) != 1 {
				t.Fatalf("stored %d messages; want 1", len(got))
			}
			if got[0].Mentioned != tt.want {
				t.Errorf("mentioned = %v; want %v", got[0].Mentioned, tt.want)
			}
			if got[0].Text != tt.wantText {
				t.Errorf("text = %q; want %q", got[0].Text, tt.wantText)
			}
		})
	}
}

func TestLIDGroupKeepsChatForReply(t *testing.T) {
	tc := newTestClient(t, nil)
	tc.conn.setState(channel.StateConnected, "")
	info := groupInfo("R1", aliceLID)
	info.AddressingMode = types.AddressingModeLID
	info.SenderAlt = alicePN
	tc.handleEvent(msgEvent(info, &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("@" + botLID.User + " hi"), ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{botLID.String()}},
	}}))
	got := tc.rec.stored()
	if len(got) != 1 {
		t.Fatalf("stored %d messages; want 1", len(got))
	}
	if got[0].Chat != familyChat.String() {
		t.Fatalf("chat = %q; want the group %q", got[0].Chat, familyChat)
	}
	if _, err := tc.Send(context.Background(), channel.Outgoing{Chat: got[0].Chat, Text: "hello", ID: NewMessageID()}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := tc.wa.sentMessages()
	if len(sent) != 1 || sent[0].to != familyChat {
		t.Errorf("sent to %v; want the group %s", sent, familyChat)
	}
}
