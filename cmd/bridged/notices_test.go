package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// The alerts' poster commits a notice as the router does (internal blocks
// stripped, an empty text refused) and has every group looked at again
// through the ingest.
func TestNoticesPost(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	in, err := ingest.New(ingest.Config{DB: db, LateWindow: time.Minute, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	n := notices{Poster: outbox.NewPoster(db, outbox.NewSignal()), in: in}
	it, err := n.SendMessage(ctx, "local:main", "low disk<internal>checked</internal>", store.OriginNotice, "main")
	if err != nil {
		t.Fatal(err)
	}
	row, err := db.Outbox.Get(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Text != "low disk" || row.Origin != store.OriginNotice || row.Group != "main" || row.State != store.OutboxPending {
		t.Errorf("row %+v; want a pending notice of main saying low disk", row)
	}
	if _, err := n.SendMessage(ctx, "local:main", "<internal>only</internal>", store.OriginNotice, ""); !errors.Is(err, router.ErrEmpty) {
		t.Errorf("empty notice: %v; want router.ErrEmpty", err)
	}
	n.Rescan()
	select {
	case <-in.Wake():
	default:
		t.Fatal("Rescan did not wake the message loop")
	}
	if _, all := in.Take(); !all {
		t.Error("Rescan did not ask for every group")
	}
}
