package whatsapp

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
)

// The owner's answers, as whatsmeow delivers them: a reply or a reaction
// to an approval request is the owner's (FromMe) only when the server says
// the account sent it, in its phone-number or LID form; another member's
// reply or reaction, or a quote claiming the owner as its participant, is
// not. A reply carries the quoted id; a reaction its target and emoji.
func TestOwnerAnswersInPhoneNumberAndLIDForm(t *testing.T) {
	const request = "3EB0REQUEST000000001"
	reply := func(text, participant string) *waE2E.Message {
		return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
			Text: proto.String(text),
			ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String(request), Participant: proto.String(participant),
				QuotedMessage: &waE2E.Message{Conversation: proto.String("Approve? yes 7 / no 7")}},
		}}
	}
	react := func(emoji string) *waE2E.Message {
		return &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String(emoji),
			Key: &waCommon.MessageKey{RemoteJID: proto.String(familyChat.String()), FromMe: proto.Bool(true), ID: proto.String(request)}}}
	}
	src := func(sender, alt types.JID, fromMe bool, mode types.AddressingMode) types.MessageSource {
		return types.MessageSource{Chat: familyChat, Sender: sender, SenderAlt: alt, IsGroup: true, IsFromMe: fromMe, AddressingMode: mode}
	}
	ownPhone := types.NewADJID(botPN.User, 0, 3) // the owner's phone, device 3
	ownLIDDevice := types.JID{User: botLID.User, Device: 3, Server: types.HiddenUserServer}
	aliceLIDDevice := types.JID{User: aliceLID.User, Device: 2, Server: types.HiddenUserServer}
	tests := []struct {
		name       string
		src        types.MessageSource
		raw        *waE2E.Message
		noOwnLID   bool // the store does not know the account's LID; the LID map links it
		fromMe     bool
		text       string
		reaction   *channel.Reaction
		wantSender types.JID
	}{
		{name: "owner's reply, phone-number form", src: src(ownPhone, botLID, true, types.AddressingModePN),
			raw: reply("yes 7", botPN.String()), fromMe: true, text: "yes 7", wantSender: botPN},
		{name: "owner's reply, LID form", src: src(ownLIDDevice, botPN, true, types.AddressingModeLID),
			raw: reply("no 7", botLID.String()), fromMe: true, text: "no 7", wantSender: botPN},
		{name: "owner's reply, LID form, LID known only to the LID map", src: src(ownLIDDevice, types.EmptyJID, true, types.AddressingModeLID),
			raw: reply("yes 7", botLID.String()), noOwnLID: true, fromMe: true, text: "yes 7", wantSender: botPN},
		{name: "owner's reaction, phone-number form", src: src(ownPhone, types.EmptyJID, true, types.AddressingModePN),
			raw: react("👍"), fromMe: true, reaction: &channel.Reaction{TargetID: request, Emoji: "👍"}, wantSender: botPN},
		{name: "owner's reaction, LID form", src: src(ownLIDDevice, botPN, true, types.AddressingModeLID),
			raw: react("👎"), fromMe: true, reaction: &channel.Reaction{TargetID: request, Emoji: "👎"}, wantSender: botPN},
		{name: "owner removes a reaction", src: src(ownPhone, types.EmptyJID, true, types.AddressingModePN),
			raw: react(""), fromMe: true, reaction: &channel.Reaction{TargetID: request}, wantSender: botPN},
		{name: "another member's reply", src: src(alicePN, aliceLID, false, types.AddressingModePN),
			raw: reply("yes 7", botPN.String()), text: "yes 7", wantSender: alicePN},
		{name: "another member's reply, LID form", src: src(aliceLIDDevice, alicePN, false, types.AddressingModeLID),
			raw: reply("yes 7", botLID.String()), text: "yes 7", wantSender: alicePN},
		{name: "another member's reaction", src: src(alicePN, types.EmptyJID, false, types.AddressingModePN),
			raw: react("👍"), reaction: &channel.Reaction{TargetID: request, Emoji: "👍"}, wantSender: alicePN},
		{name: "another member's reaction, LID form", src: src(aliceLIDDevice, types.EmptyJID, false, types.AddressingModeLID),
			raw: react("👍"), reaction: &channel.Reaction{TargetID: request, Emoji: "👍"}, wantSender: alicePN},
		{name: "forged quote: another member claims the owner as the quoted participant", src: src(alicePN, types.EmptyJID, false, types.AddressingModePN),
			raw: &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text: proto.String("yes 7"),
				ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String(request), Participant: proto.String(botPN.String()),
					RemoteJID: proto.String(familyChat.String()), QuotedMessage: &waE2E.Message{Conversation: proto.String("yes 7")}},
			}},
			text: "yes 7", wantSender: alicePN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			if tt.noOwnLID {
				tc.wa.lid = types.EmptyJID
				tc.wa.lidToPN[botLID] = botPN
			}
			info := types.MessageInfo{MessageSource: tt.src, ID: "3A00000000000000ANS1", PushName: "Someone"}
			if !tc.handleEvent(msgEvent(info, tt.raw)) {
				t.Fatal("handleEvent = false; want true")
			}
			got := tc.rec.stored()
			if len(got) != 1 {
				t.Fatalf("handed on %d messages; want 1", len(got))
			}
			m := got[0]
			if m.FromMe != tt.fromMe {
				t.Errorf("FromMe = %v; want %v", m.FromMe, tt.fromMe)
			}
			if m.Sender != tt.wantSender.String() {
				t.Errorf("Sender = %q; want %q", m.Sender, tt.wantSender)
			}
			if m.IsBot {
				t.Error("IsBot = true; want false (the outbox sent no such id)")
			}
			if tt.reaction != nil {
				if m.Reaction == nil || *m.Reaction != *tt.reaction || m.Text != "" || m.QuotedID != "" {
					t.Errorf("reaction %+v, text %q, quoted %q; want %+v, no text, no quote", m.Reaction, m.Text, m.QuotedID, tt.reaction)
				}
				return
			}
			if m.Reaction != nil || m.QuotedID != request {
				t.Errorf("reaction %+v, quoted %q; want none, %q", m.Reaction, m.QuotedID, request)
			}
			if got := m.Text; len(got) < len(tt.text) || got[:len(tt.text)] != tt.text {
				t.Errorf("text %q; want it to start with %q", got, tt.text)
			}
		})
	}
}

// groupFake serves a group's metadata, as WhatsApp would, and the reverse
// LID lookup.
type groupFake struct {
	lidFake
	mu      *sync.Mutex
	infos   map[types.JID]*types.GroupInfo
	fetches *int
}

func (f groupFake) GetGroupInfo(_ context.Context, jid types.JID) (*types.GroupInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.fetches++
	return f.infos[jid], nil
}

// The group's admins come from its metadata and follow its participant
// events; an admin matches in its phone-number and its LID form, and the
// sender's other forms are handed on for the allow list.
func TestGroupAdminsFromMetadataAndEvents(t *testing.T) {
	carolPN := types.NewJID("491700000004", types.DefaultUserServer)
	carolLID := types.NewJID("200000000000004", types.HiddenUserServer)
	tc := newTestClient(t, nil)
	tc.wa.lidToPN[carolLID] = carolPN
	fetches := 0
	tc.Client.wa = groupFake{lidFake: lidFake{tc.wa}, mu: &sync.Mutex{}, fetches: &fetches, infos: map[types.JID]*types.GroupInfo{
		familyChat: {JID: familyChat, Participants: []types.GroupParticipant{
			{JID: aliceLID, PhoneNumber: alicePN, LID: aliceLID, IsAdmin: true},
			{JID: bobPN, PhoneNumber: bobPN},
			{JID: carolLID, LID: carolLID}, // LID only: the LID map knows her number
			{JID: botLID, PhoneNumber: botPN, LID: botLID, IsSuperAdmin: true},
		}},
	}}
	n := 0
	send := func(sender, alt types.JID) channel.Message {
		t.Helper()
		n++
		info := types.MessageInfo{MessageSource: types.MessageSource{Chat: familyChat, Sender: sender, SenderAlt: alt, IsGroup: true},
			ID: "3A0000000000000ADM" + string(rune('A'+n)), PushName: "X"}
		if !tc.handleEvent(msgEvent(info, &waE2E.Message{Conversation: proto.String("hello")})) {
			t.Fatal("handleEvent = false")
		}
		got := tc.rec.stored()
		return got[len(got)-1]
	}
	admin := func(name string, sender, alt types.JID, want bool) {
		t.Helper()
		if m := send(sender, alt); m.SenderAdmin != want {
			t.Errorf("%s: SenderAdmin = %v; want %v", name, m.SenderAdmin, want)
		}
	}

	// Read from the metadata on the group's first message.
	admin("admin by phone number", alicePN, types.EmptyJID, true)
	admin("admin by LID", aliceLID, types.EmptyJID, true)
	admin("member", bobPN, types.EmptyJID, false)
	if fetches != 1 {
		t.Errorf("metadata read %d times; want once", fetches)
	}
	m := send(alicePN, types.EmptyJID)
	if !slices.Contains(m.SenderAlt, aliceLID.String()) {
		t.Errorf("SenderAlt = %v; want the LID %s", m.SenderAlt, aliceLID)
	}
	m = send(types.JID{User: aliceLID.User, Device: 4, Server: types.HiddenUserServer}, types.EmptyJID)
	if m.Sender != alicePN.String() || !slices.Contains(m.SenderAlt, aliceLID.String()) {
		t.Errorf("LID sender: Sender %q, SenderAlt %v; want %s with %s", m.Sender, m.SenderAlt, alicePN, aliceLID)
	}

	// Kept current by the participant events.
	tc.handleEvent(&events.GroupInfo{JID: familyChat, Promote: []types.JID{carolLID}, Demote: []types.JID{alicePN}})
	admin("promoted, by number", carolPN, types.EmptyJID, true)
	admin("demoted, by LID", aliceLID, types.EmptyJID, false)
	tc.handleEvent(&events.GroupInfo{JID: familyChat, Promote: []types.JID{bobPN}})
	admin("promoted member", bobPN, types.EmptyJID, true)
	tc.handleEvent(&events.GroupInfo{JID: familyChat, Leave: []types.JID{bobPN}})
	admin("admin who left", bobPN, types.EmptyJID, false)
	if fetches != 1 {
		t.Errorf("metadata read %d times; want once (the events keep it current)", fetches)
	}

	// A group joined brings its metadata along.
	tc.handleEvent(&events.JoinedGroup{GroupInfo: types.GroupInfo{JID: familyChat, Participants: []types.GroupParticipant{
		{JID: bobPN, PhoneNumber: bobPN, IsAdmin: true},
	}}})
	admin("admin of the joined group's metadata", bobPN, types.EmptyJID, true)
	admin("no longer an admin there", alicePN, types.EmptyJID, false)
}

// flakyGroups fails to read a group's metadata while err is set, and
// counts the tries.
type flakyGroups struct {
	lidFake
	mu      sync.Mutex
	err     error
	info    *types.GroupInfo
	fetches int
}

func (f *flakyGroups) GetGroupInfo(_ context.Context, jid types.JID) (*types.GroupInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches++
	if f.err != nil {
		return nil, f.err
	}
	return f.info, nil
}

func (f *flakyGroups) tries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches
}

// A group whose metadata cannot be read is not asked again for each of its
// messages (each try may wait adminFetchTimeout on the event path): its
// senders count as no admins until adminRetryAfter has passed, then it is
// read again.
func TestGroupAdminsUnreadableIsNotRefetchedPerMessage(t *testing.T) {
	tc := newTestClient(t, nil)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tc.now = func() time.Time { return now }
	groups := &flakyGroups{lidFake: lidFake{tc.wa}, err: errors.New("info query timed out"),
		info: &types.GroupInfo{JID: familyChat, Participants: []types.GroupParticipant{{JID: alicePN, PhoneNumber: alicePN, IsAdmin: true}}}}
	tc.Client.wa = groups
	n := 0
	send := func() channel.Message {
		t.Helper()
		n++
		info := types.MessageInfo{MessageSource: types.MessageSource{Chat: familyChat, Sender: alicePN, IsGroup: true},
			ID: "3A0000000000000FLK" + string(rune('A'+n)), PushName: "Alice"}
		if !tc.handleEvent(msgEvent(info, &waE2E.Message{Conversation: proto.String("hello")})) {
			t.Fatal("handleEvent = false")
		}
		got := tc.rec.stored()
		return got[len(got)-1]
	}

	for i := range 3 {
		if m := send(); m.SenderAdmin {
			t.Errorf("message %d while the metadata cannot be read: SenderAdmin = true; want false", i+1)
		}
	}
	if got := groups.tries(); got != 1 {
		t.Errorf("metadata read %d times for 3 messages while it fails; want once", got)
	}

	groups.mu.Lock()
	groups.err = nil
	groups.mu.Unlock()
	now = now.Add(adminRetryAfter - time.Second)
	if m := send(); m.SenderAdmin || groups.tries() != 1 {
		t.Errorf("before adminRetryAfter: SenderAdmin %v after %d reads; want false, still 1 read", m.SenderAdmin, groups.tries())
	}
	now = now.Add(time.Second)
	if m := send(); !m.SenderAdmin {
		t.Error("after adminRetryAfter, with the metadata readable: SenderAdmin = false; want true")
	}
	send()
	if got := groups.tries(); got != 2 {
		t.Errorf("metadata read %d times in all; want 2 (once more after adminRetryAfter, then kept)", got)
	}
}
