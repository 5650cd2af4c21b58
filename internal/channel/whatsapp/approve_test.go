package whatsapp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// ingestSink is the daemon's side of the channel, as the router wires it:
// inbound messages go through the real ingest (with the approval service
// taking answers out) into a real store.
type ingestSink struct {
	in *ingest.Ingest
	db *bridgedstore.DB
}

func (s ingestSink) Lookup(ctx context.Context, chat string) (ingest.Changed, error) {
	return s.in.Lookup(ctx, chat)
}

func (s ingestSink) Inbound(ctx context.Context, seen ingest.Changed, m channel.Message) (bridgedstore.MessageID, error) {
	return s.in.InboundSeen(ctx, seen, m)
}

func (s ingestSink) ChatSeen(ctx context.Context, chat, name string, isGroup bool) error {
	return s.db.Chats.Upsert(ctx, bridgedstore.Chat{ID: bridgedstore.ChatID(chat), Name: name, IsGroup: isGroup, LastActivity: time.Now()})
}

func (s ingestSink) IsOwnMessage(ctx context.Context, chat, id string) bool {
	ok, _ := s.db.Outbox.IsOwn(ctx, bridgedstore.ChatID(chat), id)
	return ok
}

// outboxPoster commits the approval service's notices to the outbox, as the
// router does.
type outboxPoster struct{ db *bridgedstore.DB }

func (p outboxPoster) SendMessage(ctx context.Context, chat, text string, origin bridgedstore.Origin, folder string) (bridgedstore.OutboxItem, error) {
	return p.db.Outbox.Enqueue(ctx, bridgedstore.OutboxItem{Chat: bridgedstore.ChatID(chat), Text: text, Origin: origin, Group: bridgedstore.Folder(folder)})
}

// An approval answer end to end inside the daemon: a whatsmeow event goes
// through the WhatsApp channel, the ingest and the approval service to the
// store. Only the owner's own account, in its phone-number or LID form,
// settles the open request (by `yes ID`/`no ID`, a reply quoting the
// request, or a 👍/👎 reaction to it); another member's reply, reaction or
// forged quote does not, and their reply is stored as an ordinary message;
// a stale id and a repeated answer change nothing.
func TestApprovalAnswersThroughTheChannel(t *testing.T) {
	const (
		requestSent = "3EB0REQUEST000000001" // the request's network id
		openID      = "abcd"                 // the open request
		settledID   = "wxyz"                 // a request denied before
		unknownID   = "mnpq"                 // no such request
	)
	ownPhone := types.NewADJID(botPN.User, 0, 3)
	ownLIDDevice := types.JID{User: botLID.User, Device: 3, Server: types.HiddenUserServer}
	aliceLIDDevice := types.JID{User: aliceLID.User, Device: 2, Server: types.HiddenUserServer}
	ownerPN := types.MessageSource{Chat: familyChat, Sender: ownPhone, SenderAlt: botLID, IsGroup: true, IsFromMe: true, AddressingMode: types.AddressingModePN}
	ownerLID := types.MessageSource{Chat: familyChat, Sender: ownLIDDevice, SenderAlt: botPN, IsGroup: true, IsFromMe: true, AddressingMode: types.AddressingModeLID}
	alice := types.MessageSource{Chat: familyChat, Sender: alicePN, SenderAlt: aliceLID, IsGroup: true, AddressingMode: types.AddressingModePN}
	aliceLIDForm := types.MessageSource{Chat: familyChat, Sender: aliceLIDDevice, SenderAlt: alicePN, IsGroup: true, AddressingMode: types.AddressingModeLID}

	text := func(s string) *waE2E.Message { return &waE2E.Message{Conversation: proto.String(s)} }
	quote := func(s, participant string) *waE2E.Message {
		return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
			Text: proto.String(s),
			ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String(requestSent), Participant: proto.String(participant),
				QuotedMessage: &waE2E.Message{Conversation: proto.String("Approval " + openID + ": group family wants to ...")}},
		}}
	}
	react := func(emoji string) *waE2E.Message {
		return &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String(emoji),
			Key: &waCommon.MessageKey{RemoteJID: proto.String(familyChat.String()), FromMe: proto.Bool(true), ID: proto.String(requestSent)}}}
	}
	type event struct {
		src types.MessageSource
		id  string
		raw *waE2E.Message
	}
	tests := []struct {
		name   string
		events []event
		state  bridgedstore.ApprovalState // of the open request afterwards
		by     string
		stored []string // texts stored as ordinary messages
		// notices is how many decisions were told in the main chat.
		notices int
	}{
		{name: "owner's yes ID, phone-number form", events: []event{{ownerPN, "A1", text("yes " + openID)}},
			state: bridgedstore.ApprovalAllowed, by: "chat", notices: 1},
		{name: "owner's yes ID, LID form", events: []event{{ownerLID, "A1", text("Yes " + strings.ToUpper(openID))}},
			state: bridgedstore.ApprovalAllowed, by: "chat", notices: 1},
		{name: "owner's quoting reply, phone-number form", events: []event{{ownerPN, "A1", quote("yes", botPN.String())}},
			state: bridgedstore.ApprovalAllowed, by: "quote", notices: 1},
		{name: "owner's quoting reply, LID form", events: []event{{ownerLID, "A1", quote("ok", botLID.String())}},
			state: bridgedstore.ApprovalAllowed, by: "quote", notices: 1},
		{name: "owner's 👍, phone-number form", events: []event{{ownerPN, "A1", react("👍")}},
			state: bridgedstore.ApprovalAllowed, by: "reaction", notices: 1},
		{name: "owner's 👍, LID form", events: []event{{ownerLID, "A1", react("👍🏽")}},
			state: bridgedstore.ApprovalAllowed, by: "reaction", notices: 1},
		{name: "owner's 👎", events: []event{{ownerLID, "A1", react("👎")}},
			state: bridgedstore.ApprovalDenied, by: "reaction", notices: 1},
		{name: "owner's no ID", events: []event{{ownerPN, "A1", text("no " + openID)}},
			state: bridgedstore.ApprovalDenied, by: "chat", notices: 1},
		{name: "owner's quoting no", events: []event{{ownerLID, "A1", quote("no", botLID.String())}},
			state: bridgedstore.ApprovalDenied, by: "quote", notices: 1},
		{name: "another member's yes ID", events: []event{{alice, "B1", text("yes " + openID)}},
			state: bridgedstore.ApprovalOpen, stored: []string{"yes " + openID}},
		{name: "another member's yes ID, LID form", events: []event{{aliceLIDForm, "B1", text("yes " + openID)}},
			state: bridgedstore.ApprovalOpen, stored: []string{"yes " + openID}},
		{name: "another member's quoting reply", events: []event{{alice, "B1", quote("yes", botPN.String())}},
			state: bridgedstore.ApprovalOpen, stored: []string{"yes"}},
		{name: "another member's forged quote claiming the owner, LID form", events: []event{{aliceLIDForm, "B1", quote("yes", botLID.String())}},
			state: bridgedstore.ApprovalOpen, stored: []string{"yes"}},
		{name: "another member's 👍", events: []event{{alice, "B1", react("👍")}},
			state: bridgedstore.ApprovalOpen},
		{name: "another member's 👍, LID form", events: []event{{aliceLIDForm, "B1", react("👍")}},
			state: bridgedstore.ApprovalOpen},
		{name: "stale id: a settled request", events: []event{{ownerPN, "A1", text("yes " + settledID)}},
			state: bridgedstore.ApprovalOpen},
		{name: "stale id: an unknown request", events: []event{{ownerPN, "A1", text("yes " + unknownID)}},
			state: bridgedstore.ApprovalOpen, stored: []string{"yes " + unknownID}},
		{name: "a duplicated reaction", events: []event{{ownerPN, "A1", react("👍")}, {ownerPN, "A1", react("👍")}, {ownerLID, "A2", react("👍")}},
			state: bridgedstore.ApprovalAllowed, by: "reaction", notices: 1},
		{name: "a later answer after the decision", events: []event{{ownerPN, "A1", react("👍")}, {ownerPN, "A2", text("no " + openID)}, {ownerLID, "A3", react("👎")}},
			state: bridgedstore.ApprovalAllowed, by: "reaction", notices: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := storetest.Open(t)
			if _, err := db.Groups.Add(ctx, bridgedstore.Group{Chat: bridgedstore.ChatID(familyChat.String()), Name: "Family", Folder: "main", IsMain: true, RequiresTrigger: false}); err != nil {
				t.Fatal(err)
			}
			ap := approvals.New(db, outboxPoster{db}, time.Hour, zerolog.Nop())
			in, err := ingest.New(ingest.Config{DB: db, LateWindow: time.Hour, Answers: ap.Answer, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			// The open request, posted and sent with requestSent; and one
			// denied before.
			open := bridgedstore.Approval{ID: openID, Folder: "family", RequestID: "r1", Tool: "Bash", Subject: "rm -rf build", Rule: "Bash(rm -rf build)"}
			item, err := db.Outbox.Enqueue(ctx, bridgedstore.OutboxItem{Chat: bridgedstore.ChatID(familyChat.String()),
				Text: approvals.RequestText(open, time.Hour), Origin: bridgedstore.OriginNotice})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Outbox.MarkSent(ctx, item.ID, requestSent, time.Now()); err != nil {
				t.Fatal(err)
			}
			err = db.Tx(ctx, func(tx *bridgedstore.Tx) error {
				if _, err := tx.Approvals.Add(ctx, open); err != nil {
					return err
				}
				if err := tx.Approvals.SetOutbox(ctx, openID, item.ID); err != nil {
					return err
				}
				if _, err := tx.Approvals.Add(ctx, bridgedstore.Approval{ID: settledID, Folder: "family", RequestID: "r0", Tool: "Bash", Subject: "ls", Rule: "Bash(ls)"}); err != nil {
					return err
				}
				_, err := tx.Approvals.Decide(ctx, settledID, false, false, "cli")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			before, err := db.Outbox.Pending(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}

			tc := newTestClient(t, func(o *Options) { o.Sink = ingestSink{in: in, db: db} })
			for _, ev := range tt.events {
				info := types.MessageInfo{MessageSource: ev.src, ID: types.MessageID("3A0000000000000000" + ev.id), PushName: "Someone"}
				if !tc.handleEvent(msgEvent(info, ev.raw)) {
					t.Fatalf("handleEvent(%s) = false; want true (acknowledged)", ev.id)
				}
			}

			a, err := db.Approvals.Get(ctx, openID)
			if err != nil {
				t.Fatal(err)
			}
			if a.State != tt.state || a.DecidedBy != tt.by || a.Always {
				t.Errorf("request %s: %s by %q (always %v); want %s by %q", openID, a.State, a.DecidedBy, a.Always, tt.state, tt.by)
			}
			s, err := db.Approvals.Get(ctx, settledID)
			if err != nil || s.State != bridgedstore.ApprovalDenied || s.DecidedBy != "cli" {
				t.Errorf("settled request %s: %+v, %v; want still denied by cli", settledID, s, err)
			}
			if rules, err := db.Approvals.Rules(ctx); err != nil || len(rules) != 0 {
				t.Errorf("standing rules %+v, %v; want none", rules, err)
			}
			msgs, err := db.Messages.After(ctx, bridgedstore.ChatID(familyChat.String()), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range msgs {
				if m.IsBot {
					continue // the request itself, recorded when sent
				}
				got = append(got, channel.Message{Text: m.Text, QuotedID: requestSent}.OwnText())
			}
			if strings.Join(got, "|") != strings.Join(tt.stored, "|") {
				t.Errorf("stored messages %q; want %q", got, tt.stored)
			}
			after, err := db.Outbox.Pending(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(after) - len(before); n != tt.notices {
				t.Errorf("%d notices posted; want %d", n, tt.notices)
			}
		})
	}
}
