package outbox

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

const (
	// maxSendAttempts is how many failed sends a row gets before it is
	// marked failed. A channel that is reconnecting does not use them up.
	maxSendAttempts = 8
	// sendTimeout bounds one Send of text; a file adds a second per
	// uploadRate bytes.
	sendTimeout = 60 * time.Second
	uploadRate  = 128 << 10
	// channelDownWait is how long the sender waits before looking again at
	// a channel that is reconnecting.
	channelDownWait = 2 * time.Second
	// maxBackoff caps the wait between attempts.
	maxBackoff = 2 * time.Minute
	// batch is how many pending rows one pass reads.
	batch = 500
	// markTimeout bounds one update of a row's state.
	markTimeout = 30 * time.Second
	// typingTimeout bounds one SetTyping call.
	typingTimeout = 5 * time.Second
	// typingQueue is how many typing changes may wait.
	typingQueue = 256
	// DefaultBackoff is the wait after a row's first failed send.
	DefaultBackoff = time.Second
)

// Config configures a Sender.
type Config struct {
	Store    *store.DB
	Channels []channel.Channel
	Log      zerolog.Logger
	Now      func() time.Time // the sent time stored with a row; nil: time.Now
	// Backoff is the wait after a row's first failed send; it doubles with
	// each attempt. 0: DefaultBackoff.
	Backoff time.Duration
	// Spool holds the files sent with messages, under
	// home.SpoolKey(row id, row external id). Nil: no row carries a file.
	Spool *home.Spool
	// OnSent, when set, is called (on the sender's goroutine for the chat)
	// after a row is marked sent, with the sender's context, which ends
	// when the sender stops.
	OnSent func(ctx context.Context, it store.OutboxItem)
	// OnFailed, when set, is called (on the sender's goroutine for the
	// chat) after a row is marked failed for good, with the sender's
	// context and the reason.
	OnFailed func(ctx context.Context, it store.OutboxItem, err error)
	// Signal, when set, is the signal the sender wakes on, shared with
	// whoever else commits rows (see Signal); nil: its own, which only
	// Sender.Wake raises.
	Signal *Signal
}

// Signal tells a Sender that rows were committed. It is made first, before
// the Sender that waits on it (Config.Signal) and before anything that
// commits rows without the sender's owner (the owner's alerts post their
// notices so), so nothing is wired after construction. Make it with
// NewSignal.
type Signal struct{ c chan struct{} }

// NewSignal returns a signal no one raised yet.
func NewSignal() *Signal { return &Signal{c: make(chan struct{}, 1)} }

// Wake raises the signal: rows were committed. It never blocks; one raise
// stands for any number of commits since the sender last looked.
func (s *Signal) Wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// Sender sends the outbox and applies typing changes. Create it with New;
// it works while Run runs.
type Sender struct {
	cfg    Config
	db     *store.DB
	log    zerolog.Logger
	wake   *Signal
	flushQ chan chan struct{}
	typing chan typingReq

	// downWait, when set, replaces channelDownWait (tests shorten it).
	downWait time.Duration
}

// retryLater is when a chat whose channel is reconnecting, or whose pass
// went wrong, is looked at again: channelDownWait from now, the sender's
// polling tick.
func (s *Sender) retryLater() time.Time {
	if s.downWait > 0 {
		return time.Now().Add(s.downWait)
	}
	return time.Now().Add(channelDownWait)
}

// New returns a Sender over cfg.
func New(cfg Config) (*Sender, error) {
	if cfg.Store == nil {
		return nil, errors.New("new outbox sender: no store")
	}
	if cfg.Backoff < 0 {
		return nil, errors.New("new outbox sender: negative backoff")
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Channels = slices.Clone(cfg.Channels)
	if cfg.Signal == nil {
		cfg.Signal = NewSignal()
	}
	return &Sender{
		cfg:    cfg,
		db:     cfg.Store,
		log:    cfg.Log.With().Str("component", "outbox").Logger(),
		wake:   cfg.Signal,
		flushQ: make(chan chan struct{}),
		typing: make(chan typingReq, typingQueue),
	}, nil
}

// Wake tells the sender that rows were committed. It never blocks.
func (s *Sender) Wake() { s.wake.Wake() }

// Run sends the outbox and applies typing changes until ctx ends, then
// waits for the sends in flight (each bounded by its own timeout) and
// returns. Rows left pending are sent by the next Run.
func (s *Sender) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.protect("typing", func() { s.typingLoop(ctx) }) })
	s.protect("outbox sender", func() { s.send(ctx) })
	wg.Wait()
}

// Flush waits until the sender has nothing it can send now (every row sent,
// failed, or waiting for a retry or a channel) and reports true, or until
// ctx ends and reports false. Run must be running.
func (s *Sender) Flush(ctx context.Context) bool {
	w := make(chan struct{})
	select {
	case s.flushQ <- w:
	case <-ctx.Done():
		return false
	}
	select {
	case <-w:
		return true
	case <-ctx.Done():
		return false
	}
}

// protect runs fn and turns a panic into a logged error.
func (s *Sender) protect(what string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error().Str("part", what).Interface("panic", p).Msg("outbox part panicked")
		}
	}()
	fn()
}

// channelFor returns the first channel that owns chat, nil if none does.
func (s *Sender) channelFor(chat string) channel.Channel {
	for _, c := range s.cfg.Channels {
		if c.Owns(chat) {
			return c
		}
	}
	return nil
}

// sendDone reports the end of one chat's sending pass.
type sendDone struct {
	chat    store.ChatID
	retryAt time.Time // zero: nothing waits
}

// send sends the outbox: each chat's pending rows in order, chats in
// parallel. It is woken by every commit, retries transient failures with
// backoff (a chat's later rows wait for its earlier ones), and on start
// sends what an earlier run left pending.
func (s *Sender) send(ctx context.Context) {
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
		rows, err := s.db.Outbox.Pending(ctx, batch)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Error().Err(err).Msg("cannot read the outbox")
			next = s.retryLater()
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
			wg.Go(func() {
				// A panic must still free the chat, or its rows would
				// never go out again.
				res := sendDone{retryAt: s.retryLater()}
				s.protect("outbox sender", func() { res = s.sendChat(ctx, chat, items) })
				res.chat = chat
				select {
				case done <- res:
				case <-ctx.Done():
				}
			})
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
		case <-s.wake.c:
		case <-timer.C:
		case res := <-done:
			delete(busy, res.chat)
			if res.retryAt.IsZero() {
				delete(retryAt, res.chat)
			} else {
				retryAt[res.chat] = res.retryAt
			}
		case w := <-s.flushQ:
			waiters = append(waiters, w)
		}
		timer.Stop()
	}
}

// sendChat sends one chat's pending rows in order. It stops at the first row
// that must wait and says until when.
func (s *Sender) sendChat(ctx context.Context, chat store.ChatID, items []store.OutboxItem) sendDone {
	log := s.log.With().Str("chat", string(chat)).Logger()
	ch := s.channelFor(string(chat))
	// mark records a row's new state. When that fails the row is still
	// pending: the chat waits a little before it is looked at again.
	mark := func(fn func(context.Context) error) bool {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
		defer cancel()
		if err := fn(mctx); err != nil {
			log.Error().Err(err).Msg("cannot update the outbox")
			return false
		}
		return true
	}
	later := sendDone{retryAt: s.retryLater()}
	for _, it := range items {
		log := log.With().Int64("outbox", int64(it.ID)).Str("origin", string(it.Origin)).Logger()
		if ch == nil {
			log.Error().Msg("no channel handles this chat; message not sent")
			if mark(func(c context.Context) error {
				return s.db.Outbox.MarkFailed(c, it.ID, "no channel handles chat "+string(chat))
			}) {
				s.dropFile(log, it)
				s.failed(ctx, it, errNoChannel)
			}
			continue
		}
		if st := ch.Status().State; st != channel.StateConnected && st.Recoverable() {
			log.Debug().Str("state", string(st)).Msg("channel not connected; message waits")
			return sendDone{retryAt: s.retryLater()}
		}
		out := channel.Outgoing{Chat: string(chat), Text: it.Text, ID: it.ExternalID, Notice: it.Origin == store.OriginNotice && it.Group == ""}
		if s.cfg.Spool != nil {
			f, ok, err := s.cfg.Spool.Get(home.SpoolKey(int64(it.ID), it.ExternalID))
			if err != nil {
				log.Error().Err(err).Msg("cannot read the message's file; message waits")
				return later
			}
			if ok {
				out.Attachment = &channel.Attachment{Path: f.Path, Name: f.Name, MIME: f.MIME,
					Kind: channel.AttachmentKind(f.Kind), Size: f.Size}
			}
		}
		sctx, cancel := context.WithTimeout(ctx, sendTimeoutFor(out))
		sentID, err := ch.Send(sctx, out)
		cancel()
		if err == nil {
			if !mark(func(c context.Context) error { return s.db.Outbox.MarkSent(c, it.ID, sentID, s.cfg.Now()) }) {
				return later // sent but not recorded: it goes again, under the same id
			}
			log.Debug().Int("bytes", len(it.Text)).Msg("message sent")
			if s.dropFile(log, it) && out.Attachment != nil {
				log.Debug().Str("file", out.Attachment.Name).Msg("sent file's copy removed")
			}
			if s.cfg.OnSent != nil {
				s.cfg.OnSent(ctx, it)
			}
			continue
		}
		if ctx.Err() != nil {
			return sendDone{} // stopping: the row stays pending for the next start
		}
		attempts := it.Attempts + 1
		if errors.Is(err, channel.ErrPermanent) || attempts >= maxSendAttempts {
			log.Error().Err(err).Int("attempts", attempts).Msg("message could not be sent; marked failed")
			if !mark(func(c context.Context) error { return s.db.Outbox.MarkFailed(c, it.ID, err.Error()) }) {
				return later
			}
			s.dropFile(log, it)
			s.failed(ctx, it, err)
			continue
		}
		wait := min(s.cfg.Backoff<<(attempts-1), maxBackoff)
		log.Warn().Err(err).Int("attempts", attempts).Dur("retry_in", wait).Msg("send failed; will retry")
		mark(func(c context.Context) error { return s.db.Outbox.MarkAttempt(c, it.ID, err.Error()) })
		return sendDone{retryAt: time.Now().Add(wait)}
	}
	return sendDone{}
}

// dropFile removes the spooled copy of row it's file, if any, once the row
// is marked sent or failed (the row keeps the file's name and size), and
// reports whether nothing is left. A copy
// that cannot be removed now (or that a crash left after the mark) is the
// retention sweep's (home.Spool.Prune).
func (s *Sender) dropFile(log zerolog.Logger, it store.OutboxItem) bool {
	if s.cfg.Spool == nil {
		return false
	}
	if err := s.cfg.Spool.Remove(home.SpoolKey(int64(it.ID), it.ExternalID)); err != nil {
		log.Warn().Err(err).Msg("cannot remove the sent message's file; the retention sweep will")
		return false
	}
	return true
}

// errNoChannel is the reason of a row no channel handles.
var errNoChannel = errors.New("no channel handles the chat")

// failed tells OnFailed, if set, that it failed for good.
func (s *Sender) failed(ctx context.Context, it store.OutboxItem, err error) {
	if s.cfg.OnFailed != nil {
		s.cfg.OnFailed(ctx, it, err)
	}
}

// typingReq asks for the typing indicator in chat on or off.
type typingReq struct {
	chat string
	on   bool
}

// SetTyping queues a typing change for chat; it never blocks. Changes are
// applied in order by Run, best effort.
func (s *Sender) SetTyping(chat string, on bool) {
	select {
	case s.typing <- typingReq{chat: chat, on: on}:
	default:
		s.log.Debug().Str("chat", chat).Msg("typing change dropped: queue full")
	}
}

func (s *Sender) typingLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-s.typing:
			ch := s.channelFor(req.chat)
			if ch == nil {
				continue
			}
			tctx, cancel := context.WithTimeout(ctx, typingTimeout)
			if err := ch.SetTyping(tctx, req.chat, req.on); err != nil {
				s.log.Debug().Err(err).Str("chat", req.chat).Bool("on", req.on).Msg("cannot set typing")
			}
			cancel()
		}
	}
}

// sendTimeoutFor bounds the Send of m: sendTimeout, and for a file the time
// to upload it at uploadRate bytes a second, so a large document on a slow
// link is not cut off (and uploaded again) on every attempt.
func sendTimeoutFor(m channel.Outgoing) time.Duration {
	if m.Attachment == nil {
		return sendTimeout
	}
	return sendTimeout + time.Duration(m.Attachment.Size/uploadRate)*time.Second
}
