package router

import (
	"context"
	"fmt"
	"time"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// SendMessage commits text to the outbox for chat and wakes the sender. The
// <internal>…</internal> blocks are removed first; when nothing is left it
// returns ErrEmpty and commits nothing. folder is the group the message
// comes from (empty for the daemon's own). A message the group's agent sends
// to its own chat while it handles messages counts as a reply: from then on
// that run's messages are not run again.
func (r *Router) SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	text = prompt.StripInternal(text)
	if text == "" {
		return store.OutboxItem{}, ErrEmpty
	}
	item := store.OutboxItem{Chat: store.ChatID(chat), Group: store.Folder(folder), Text: text, Origin: origin}

	var gs *groupState
	if folder != "" && origin == store.OriginTool {
		r.mu.Lock()
		gs = r.groups[store.Folder(folder)]
		r.mu.Unlock()
	}
	var run *liveRun
	if gs != nil {
		gs.mu.Lock()
		defer gs.mu.Unlock()
		// A run whose turn failed for good stores no cursor any more: its
		// messages run again from the last stored one.
		if rn := gs.run; rn != nil && rn.kind == groupqueue.KindMessages && rn.chat == item.Chat && rn.broken == nil {
			run = rn
		}
	}
	var stored store.OutboxItem
	err := r.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if stored, err = tx.EnqueueOutbox(ctx, item); err != nil {
			return err
		}
		if run != nil {
			return tx.SetCursor(ctx, item.Group, run.settled)
		}
		return nil
	})
	if err != nil {
		return store.OutboxItem{}, fmt.Errorf("send message to %s: %w", chat, err)
	}
	if run != nil {
		run.replied = true
		run.acted = false // the chat heard from the agent after it acted
		gs.persisted = run.settled
		r.publish(item.Group, run)
	}
	r.out.Wake()
	return stored, nil
}

// newSender builds the router's outbox sender; backoff is the wait after a
// row's first failed send.
func (r *Router) newSender(backoff time.Duration) *outbox.Sender {
	spool := r.home.Spool()
	s, err := outbox.New(outbox.Config{
		Spool:    &spool,
		Store:    r.db,
		Channels: r.channels,
		Log:      r.baseLog,
		Now:      r.now,
		Backoff:  backoff,
		OnSent:   r.sent,
		OnFailed: r.sendFailed,
	})
	if err != nil {
		panic(err) // the store is checked by New, and backoff is never negative
	}
	return s
}

// sent is called by the sender after a row is marked sent.
func (r *Router) sent(it store.OutboxItem) {
	if it.Origin == store.OriginReply {
		r.typingOffAfterReply(it)
	}
	r.clearAlert(OutboxFailedKey(it.Chat))
	if r.onSent != nil {
		r.onSent(it)
	}
}

// typingOffAfterReply hides the typing indicator once a reply is out, unless
// the group's agent is working on another turn.
func (r *Router) typingOffAfterReply(it store.OutboxItem) {
	if it.Group != "" {
		r.mu.Lock()
		gs := r.groups[it.Group]
		r.mu.Unlock()
		if gs != nil {
			gs.mu.Lock()
			busy := gs.run != nil && !r.queue.Idle(string(it.Group))
			gs.mu.Unlock()
			if busy {
				return
			}
		}
	}
	r.out.SetTyping(string(it.Chat), false)
}

// flush waits until the sender has nothing it can send now, or ctx ends.
func (r *Router) flush(ctx context.Context) {
	if !r.out.Flush(ctx) {
		r.log.Warn().Msg("outbox not flushed before the shutdown deadline; pending messages go out at the next start")
	}
}
