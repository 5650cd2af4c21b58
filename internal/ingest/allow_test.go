package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// A group's allow list decides, when a message arrives, whether its sender
// may wake the agent: the owner always, an admitted sender in any form the
// channel knows, an admin when the list says admins; anyone else's message
// is stored as context (NotAllowed), or not at all when the group drops
// them. A reaction is never stored as a message and wakes nothing.
func TestInboundAllowList(t *testing.T) {
	ctx := context.Background()
	const bobPN, bobLID = "491700000002@s.whatsapp.net", "222@lid"
	tests := []struct {
		name   string
		allow  []string
		others string
		m      channel.Message
		stored bool
		notOK  bool
	}{
		{"everyone by default", nil, "", channel.Message{Sender: "local:bob"}, true, false},
		{"owner always", []string{"local:carol"}, store.OthersDrop, channel.Message{Sender: "you", FromMe: true}, true, false},
		{"listed local sender", []string{"local:bob"}, "", channel.Message{Sender: "local:bob"}, true, false},
		{"other local sender is context", []string{"local:carol"}, "", channel.Message{Sender: "local:bob"}, true, true},
		{"other local sender dropped", []string{"local:carol"}, store.OthersDrop, channel.Message{Sender: "local:bob"}, false, false},
		{"phone entry admits the LID form", []string{"+49 170 0000002"}, "", channel.Message{Sender: bobLID, SenderAlt: []string{bobPN}}, true, false},
		{"LID entry admits the phone form", []string{bobLID}, "", channel.Message{Sender: bobPN, SenderAlt: []string{bobLID}}, true, false},
		{"LID entry without a known mapping", []string{bobLID}, "", channel.Message{Sender: bobPN}, true, true},
		{"admins admit an admin", []string{store.AllowAdmins}, "", channel.Message{Sender: bobPN, SenderAdmin: true}, true, false},
		{"admins do not admit a member", []string{store.AllowAdmins}, "", channel.Message{Sender: bobPN}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, db := newIngest(t, nil)
			g, err := db.Groups.ByFolder(ctx, "main")
			if err != nil {
				t.Fatal(err)
			}
			g.Allow, g.Others = tt.allow, tt.others
			if err := db.Groups.Update(ctx, g); err != nil {
				t.Fatal(err)
			}
			m := tt.m
			m.Chat, m.ExternalID, m.Text, m.SentAt = "local:main", "e1", "@Andy hello", time.Now()
			id, err := in.Inbound(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			if (id != 0) != tt.stored {
				t.Fatalf("stored id %d; want stored %v", id, tt.stored)
			}
			if woken(in) != tt.stored {
				t.Fatalf("woke the loop: %v; want %v", !tt.stored, tt.stored)
			}
			if !tt.stored {
				if n, _ := db.Messages.After(ctx, "local:main", 0, 0); len(n) != 0 {
					t.Fatalf("dropped message stored: %+v", n)
				}
				return
			}
			got, err := db.Messages.GetStored(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.NotAllowed != tt.notOK {
				t.Fatalf("NotAllowed = %v; want %v", got.NotAllowed, tt.notOK)
			}
		})
	}
}

func TestInboundReactionIsNotAPrompt(t *testing.T) {
	in, db := newIngest(t, nil)
	ctx := context.Background()
	id, err := in.Inbound(ctx, channel.Message{Chat: "local:main", ExternalID: "r1", Sender: "you", FromMe: true,
		Text: "👍", Reaction: &channel.Reaction{TargetID: "e0", Emoji: "👍"}, SentAt: time.Now()})
	if err != nil || id != 0 {
		t.Fatalf("Inbound = %d, %v; want 0, nil", id, err)
	}
	if woken(in) {
		t.Fatal("a reaction woke the loop")
	}
	if n, _ := db.Messages.After(ctx, "local:main", 0, 0); len(n) != 0 {
		t.Fatalf("reaction stored as a message: %+v", n)
	}
}

// A channel that looks a chat up before it builds the message (Lookup)
// stores it with what it found (InboundSeen): one lookup in all, and that
// one's group is judged for the allow list. A seen of another chat is not
// trusted: the message's own chat is looked up.
func TestInboundSeenLooksUpOnce(t *testing.T) {
	in, db := newIngest(t, nil)
	ctx := context.Background()
	m := channel.Message{Chat: "local:main", ExternalID: "s1", Sender: "local:bob", Text: "@Andy hello", SentAt: time.Now()}
	before := db.Groups.Lookups()
	seen, err := in.Lookup(ctx, m.Chat)
	if err != nil || !seen.Known || !seen.Registered || seen.Group.Folder != "main" {
		t.Fatalf("Lookup = %+v, %v; want main, registered", seen, err)
	}
	if id, err := in.InboundSeen(ctx, seen, m); err != nil || id == 0 {
		t.Fatalf("InboundSeen = %d, %v; want stored", id, err)
	}
	if got := db.Groups.Lookups() - before; got != 1 {
		t.Errorf("%d group lookups; want 1", got)
	}

	other := seen
	other.Group.Chat = "local:other"
	m.ExternalID = "s2"
	before = db.Groups.Lookups()
	if id, err := in.InboundSeen(ctx, other, m); err != nil || id == 0 {
		t.Fatalf("InboundSeen with another chat's group = %d, %v; want stored", id, err)
	}
	if got := db.Groups.Lookups() - before; got != 1 {
		t.Errorf("with another chat's group: %d group lookups; want 1 (its own)", got)
	}
}
