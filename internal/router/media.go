package router

import (
	"github.com/bridged-app/bridged/internal/store"
)

// MediaQueue fetches the media of inbound messages (internal/media). Add is
// called once the message and its media row are committed, and must not
// block; the queue reports back through ingest.Ingest.MediaSettled.
type MediaQueue interface {
	Add(m store.Media)
}
