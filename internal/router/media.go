package router

import (
	"github.com/bridged-app/bridged/internal/store"
)

// MediaQueue fetches the media of inbound messages (internal/media). Add is
// called once the message and its media row are committed, and must not
// block; the queue reports back through Router.MediaSettled.
type MediaQueue interface {
	Add(m store.Media)
}

// MediaSettled tells the router that a media of chat settled (saved or
// failed, its placeholder written into the message): the messages it held
// back are pending now, so the message loop looks at the chat again.
func (r *Router) MediaSettled(chat store.ChatID) { r.in.MediaSettled(chat) }
