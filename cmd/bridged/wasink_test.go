package main

import (
	"context"
	"testing"

	"github.com/bridged-app/bridged/internal/channel/whatsapp"
	"github.com/bridged-app/bridged/internal/store"
)

// The WhatsApp sink answers from the store under the caller's context: a
// registered group is known, a stranger is not, and a
// cancelled event's lookups fail instead of running on a context of their
// own.
func TestWhatsAppSinkLooksUpUnderTheCallersContext(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "120363001@g.us", Folder: "family", Trigger: "@Andy", RequiresTrigger: true}); err != nil {
		t.Fatal(err)
	}
	s := waSink{db: db}
	if !s.IsRegistered(ctx, "120363001@g.us") || s.IsRegistered(ctx, "120363999@g.us") {
		t.Error("IsRegistered: want the family group registered and the other not")
	}
	if err := s.ChatSeen(ctx, "120363999@g.us", "Neighbours", true); err != nil {
		t.Fatal(err)
	}
	if c, err := db.Chats.Get(ctx, "120363999@g.us"); err != nil || c.Name != "Neighbours" || c.Channel != whatsapp.ChannelName || !c.IsGroup {
		t.Errorf("chat after ChatSeen: %+v, %v; want Neighbours, whatsapp, group", c, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if !s.IsRegistered(cancelled, "120363999@g.us") {
		t.Error("IsRegistered when the store cannot answer: false; want yes (Inbound decides again)")
	}
}
