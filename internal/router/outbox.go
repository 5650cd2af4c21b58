package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/store"
)

// Outbox sending.
const (
	// maxSendAttempts is how many failed sends a row gets before it is
	// marked failed. A channel that is reconnecting does not use them up.
	maxSendAttempts = 8
	// sendTimeout bounds one Send.
	sendTimeout = 60 * time.Second
	// channelDownWait is how long the sender waits before looking again at
	// a channel that is reconnecting.
	channelDownWait = 2 * time.Second
	// maxBackoff caps the wait between attempts.
	maxBackoff = 2 * time.Minute
	// outboxBatch is how many pending rows one pass reads.
	outboxBatch = 500
)

// SendMessage commits text to the outbox for chat and wakes the sender. The
// <internal>…</internal> blocks are removed first; when nothing is left it
// returns ErrEmpty and commits nothing. folder is the group the message
// comes from (empty for the daemon's own). A message the group's agent sends
// to its own chat while it handles messages counts as a reply: from then on
// that run's messages are not run again.
func (r *Router) SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	text = StripInternal(text)
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
		if rn := gs.run; rn != nil && !rn.ended && rn.kind == groupqueue.KindMessages && rn.chat == item.Chat && rn.broken == nil {
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
	}
	signal(r.outWake)
	return stored, nil
}

// sendDone reports the end of one chat's sending pass.
type sendDone struct {
	chat    store.ChatID
	retryAt time.Time // zero: nothing waits
}

// sender sends the outbox: each chat's pending rows in order, chats in
// parallel. It is woken by every commit, retries transient failures with
// backoff (a chat's later rows wait for its earlier ones), and on start
// sends what an earlier run left pending.
func (r *Router) sender(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := make(map[store.ChatID]bool)
	retryAt := make(map[store.ChatID]time.Time)
	done := make(chan sendDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var waiters []chan struct{}
	for {
		var next time.Time
		rows, err := r.db.PendingOutbox(ctx, outboxBatch)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Error().Err(err).Msg("cannot read the outbox")
			next = time.Now().Add(channelDownWait)
		}
		now := time.Now()
		byChat := make(map[store.ChatID][]store.OutboxItem)
		var order []store.ChatID
		for _, it := range rows {
			if _, ok := byChat[it.Chat]; !ok {
				order = append(order, it.Chat)
			}
			byChat[it.Chat] = append(byChat[it.Chat], it)
		}
		for _, chat := range order {
			if busy[chat] {
				continue
			}
			if t := retryAt[chat]; t.After(now) {
				if next.IsZero() || t.Before(next) {
					next = t
				}
				continue
			}
			busy[chat] = true
			items := byChat[chat]
			wg.Add(1)
			go func() {
				defer wg.Done()
				var res sendDone
				r.protect("outbox sender", func() { res = r.sendChat(ctx, chat, items) })
				res.chat = chat
				select {
				case done <- res:
				case <-ctx.Done():
				}
			}()
		}
		if len(busy) == 0 {
			for _, w := range waiters {
				close(w)
			}
			waiters = nil
		}
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-r.outWake:
		case <-timer.C:
		case res := <-done:
			delete(busy, res.chat)
			if res.retryAt.IsZero() {
				delete(retryAt, res.chat)
			} else {
				retryAt[res.chat] = res.retryAt
			}
		case w := <-r.flushQ:
			waiters = append(waiters, w)
		}
		timer.Stop()
	}
}

// sendChat sends one chat's pending rows in order. It stops at the first row
// that must wait and says until when.
func (r *Router) sendChat(ctx context.Context, chat store.ChatID, items []store.OutboxItem) sendDone {
	log := r.log.With().Str("chat", string(chat)).Logger()
	ch := r.channelFor(string(chat))
	// mark records a row's new state. When that fails the row is still
	// pending: the chat waits a little before it is looked at again.
	mark := func(fn func(context.Context) error) bool {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shortTimeout)
		defer cancel()
		if err := fn(mctx); err != nil {
			log.Error().Err(err).Msg("cannot update the outbox")
			return false
		}
		return true
	}
	later := sendDone{retryAt: time.Now().Add(channelDownWait)}
	for _, it := range items {
		log := log.With().Int64("outbox", int64(it.ID)).Str("origin", string(it.Origin)).Logger()
		if ch == nil {
			log.Error().Msg("no channel handles this chat; message not sent")
			mark(func(c context.Context) error {
				return r.db.MarkFailed(c, it.ID, "no channel handles chat "+string(chat))
			})
			continue
		}
		if st := ch.Status().State; st != channel.StateConnected && st.Recoverable() {
			log.Debug().Str("state", string(st)).Msg("channel not connected; message waits")
			return sendDone{retryAt: time.Now().Add(channelDownWait)}
		}
		sctx, cancel := context.WithTimeout(ctx, sendTimeout)
		sentID, err := ch.Send(sctx, channel.Outgoing{Chat: string(chat), Text: it.Text, ID: it.ExternalID})
		cancel()
		if err == nil {
			if !mark(func(c context.Context) error { return r.db.MarkSent(c, it.ID, sentID, r.now()) }) {
				return later // sent but not recorded: it goes again, under the same id
			}
			log.Debug().Int("bytes", len(it.Text)).Msg("message sent")
			if it.Origin == store.OriginReply {
				r.typingOffAfterReply(it)
			}
			if r.onSent != nil {
				r.onSent(it)
			}
			continue
		}
		if ctx.Err() != nil {
			return sendDone{} // stopping: the row stays pending for the next start
		}
		attempts := it.Attempts + 1
		if errors.Is(err, channel.ErrPermanent) || attempts >= maxSendAttempts {
			log.Error().Err(err).Int("attempts", attempts).Msg("message could not be sent; marked failed")
			if !mark(func(c context.Context) error { return r.db.MarkFailed(c, it.ID, err.Error()) }) {
				return later
			}
			continue
		}
		wait := min(r.sendBackoff<<(attempts-1), maxBackoff)
		log.Warn().Err(err).Int("attempts", attempts).Dur("retry_in", wait).Msg("send failed; will retry")
		mark(func(c context.Context) error { return r.db.MarkAttempt(c, it.ID, err.Error()) })
		return sendDone{retryAt: time.Now().Add(wait)}
	}
	return sendDone{}
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
			busy := gs.run != nil && gs.run.busy
			gs.mu.Unlock()
			if busy {
				return
			}
		}
	}
	r.setTyping(string(it.Chat), false)
}

// flush waits until the sender has nothing it can send now, or ctx ends.
func (r *Router) flush(ctx context.Context) {
	w := make(chan struct{})
	select {
	case r.flushQ <- w:
	case <-ctx.Done():
		return
	}
	select {
	case <-w:
	case <-ctx.Done():
		r.log.Warn().Msg("outbox not flushed before the shutdown deadline; pending messages go out at the next start")
	}
}

// typingReq asks for the typing indicator in chat on or off.
type typingReq struct {
	chat string
	on   bool
}

// typingTimeout bounds one SetTyping call.
const typingTimeout = 5 * time.Second

// setTyping queues a typing change; it never blocks. Changes are applied in
// order by typingLoop, best effort.
func (r *Router) setTyping(chat string, on bool) {
	select {
	case r.typing <- typingReq{chat: chat, on: on}:
	default:
		r.log.Debug().Str("chat", chat).Msg("typing change dropped: queue full")
	}
}

func (r *Router) typingLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-r.typing:
			ch := r.channelFor(req.chat)
			if ch == nil {
				continue
			}
			tctx, cancel := context.WithTimeout(ctx, typingTimeout)
			if err := ch.SetTyping(tctx, req.chat, req.on); err != nil {
				r.log.Debug().Err(err).Str("chat", req.chat).Bool("on", req.on).Msg("cannot set typing")
			}
			cancel()
		}
	}
}
