package main

import (
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/outbox"
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
