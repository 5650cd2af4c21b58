package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/store"
)

// notices posts the owner's alerts (alerts.Poster) without the router: a
// notice goes through the router's Poster (committed to the outbox, the
// sender woken); a rescan goes to the ingest, which wakes the router's
// message loop. Both are built before the alerts and the router.
type notices struct {
	outbox.Poster
	in *ingest.Ingest
}

// Rescan has every group's pending messages looked at again.
func (n notices) Rescan() { n.in.Rescan() }

// tellOwner posts text to the main chat as a notice (a held memory change);
// a failure is logged.
func tellOwner(db *store.DB, p outbox.Poster, log zerolog.Logger) func(context.Context, string) {
	return func(ctx context.Context, text string) {
		main, err := db.Groups.Main(ctx)
		if err == nil {
			_, err = p.SendMessage(context.WithoutCancel(ctx), string(main.Chat), text, store.OriginNotice, "")
		}
		if err != nil {
			log.Warn().Err(err).Msg("cannot tell the owner about a held memory change")
		}
	}
}
