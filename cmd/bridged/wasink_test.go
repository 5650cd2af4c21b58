package main

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel/whatsapp"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
)

// The WhatsApp sink answers from the store under the caller's context: a
// registered group is known, a stranger is not, and a
// cancelled event's lookups fail instead of running on a context of their
// own (the message is then not acknowledged, and WhatsApp redelivers it).
func TestWhatsAppSinkLooksUpUnderTheCallersContext(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "120363001@g.us", Folder: "family", Trigger: "@Andy", RequiresTrigger: true}); err != nil {
		t.Fatal(err)
	}
	in, err := ingest.New(ingest.Config{DB: db, LateWindow: time.Minute, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	s := waSink{in: in, db: db}
	family, err1 := s.Lookup(ctx, "120363001@g.us")
	other, err2 := s.Lookup(ctx, "120363999@g.us")
	if err1 != nil || err2 != nil || !family.Registered || family.Group.Folder != "family" || other.Registered {
		t.Errorf("Lookup: family %+v, %v; other %+v, %v; want the family group registered and the other not", family, err1, other, err2)
	}
	if err := s.ChatSeen(ctx, "120363999@g.us", "Neighbours", true); err != nil {
		t.Fatal(err)
	}
	if c, err := db.Chats.Get(ctx, "120363999@g.us"); err != nil || c.Name != "Neighbours" || c.Channel != whatsapp.ChannelName || !c.IsGroup {
		t.Errorf("chat after ChatSeen: %+v, %v; want Neighbours, whatsapp, group", c, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Lookup(cancelled, "120363999@g.us"); err == nil {
		t.Error("Lookup when the store cannot answer: no error; want one (the message is not acknowledged)")
	}
}
