package router

import (
	"github.com/bridged-app/bridged/internal/channel"
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
func (r *Router) MediaSettled(chat store.ChatID) {
	r.mu.Lock()
	r.dirty[chat] = struct{}{}
	r.settled[chat]++
	r.mu.Unlock()
	signal(r.wake)
}

// mediaOf is the media row of message id.
func mediaOf(id store.MessageID, chat store.ChatID, m *channel.Media) *store.Media {
	return &store.Media{
		MessageID: id, Chat: chat, Source: m.Source, Ref: m.Ref, Label: m.Label, Name: m.Name, MIME: m.MIME,
		Size: m.Size, Voice: m.Voice, Seconds: m.Seconds, Head: m.Head, Tail: m.Tail,
	}
}
