package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// Poster commits bridged's own messages (notices, approval requests, the
// owner's alerts) to the outbox and wakes the sender through the signal it
// waits on, as the router's SendMessage does for a message that is not an
// agent's. It needs no router: the daemon builds it, with the signal, before
// the parts that post (approvals, alerts, /remote-control) and before the
// router, which takes the same signal. Make it with NewPoster.
type Poster struct {
	db  *store.DB
	out *Signal
}

// NewPoster returns a Poster committing to db and raising out.
func NewPoster(db *store.DB, out *Signal) Poster { return Poster{db: db, out: out} }

// SendMessage commits text to chat's outbox and wakes the sender. As in the
// router's SendMessage, <internal>…</internal> blocks are removed first and a
// text left empty is ErrEmpty.
func (p Poster) SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	text, err := Sendable(text)
	if err != nil {
		return store.OutboxItem{}, err
	}
	it, err := p.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(chat), Group: store.Folder(folder), Text: text, Origin: origin})
	if err != nil {
		return store.OutboxItem{}, fmt.Errorf("send message to %s: %w", chat, err)
	}
	p.out.Wake()
	return it, nil
}

// ErrEmpty is returned when nothing is left to send once the <internal>
// blocks are removed.
var ErrEmpty = errors.New("message is empty")

// Sendable is text without its <internal>…</internal> blocks, or ErrEmpty
// when nothing is left: what the router and Poster commit of a text.
func Sendable(text string) (string, error) {
	if text = prompt.StripInternal(text); text == "" {
		return "", ErrEmpty
	}
	return text, nil
}
