// Package ingest stores inbound messages and wakes the router's message
// loop. It is built first, before the channels, the media pool and the
// router: the channels hand it what they receive, the media pool tells it
// when a chat's media settled, and the router takes it at construction and
// reads from it which chats changed, each with its group as the ingest
// looked it up for the chat's newest message (Changed): a message's group
// is looked up once, here, for its allow list (through Lookup, before the
// message is built, for a channel that builds only registered chats'
// messages), and the message loop uses that while the registry is
// unchanged. Nothing is wired after
// construction.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// MediaQueue takes the media of stored messages for fetching
// (internal/media). Add is called once the message and its media row are
// committed, and must not block.
type MediaQueue interface {
	Add(m store.Media)
}

// Config configures an Ingest.
type Config struct {
	DB *store.DB
	// ChannelOf names the channel that owns chat ("" when none does); nil:
	// no chat has one.
	ChannelOf func(chat string) string
	// Media, when set, fetches the media of inbound messages; without it a
	// media message says its file was not downloaded.
	Media MediaQueue
	// LateWindow: a message stored more than this after it was sent is
	// marked late. It must be positive.
	LateWindow time.Duration
	Now        func() time.Time // nil: time.Now
	Log        zerolog.Logger
	// Answers, when set, takes approval answers (internal/approvals) and
	// the owner's commands (internal/remotecontrol) out before storage: it
	// reports true when the message must not be stored. Without it, a reaction is dropped and anything else stored.
	Answers func(ctx context.Context, m channel.Message) bool
}

// Ingest stores inbound messages and keeps which chats changed since the
// message loop last looked. It is safe for concurrent use.
type Ingest struct {
	cfg  Config
	log  zerolog.Logger
	wake chan struct{}

	// mu guards the fields below; it is never held across the store.
	mu    sync.Mutex
	dirty map[store.ChatID]Changed
	all   bool
}

// New builds an Ingest.
func New(cfg Config) (*Ingest, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("new ingest: no store")
	case cfg.LateWindow <= 0:
		return nil, errors.New("new ingest: late window is not positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ChannelOf == nil {
		cfg.ChannelOf = func(string) string { return "" }
	}
	return &Ingest{
		cfg: cfg, log: cfg.Log, wake: make(chan struct{}, 1),
		dirty: map[store.ChatID]Changed{},
	}, nil
}

// Changed is a chat that changed since the message loop last looked, with
// its group as the ingest looked it up for the chat's newest message: the
// one lookup of a message's group. The loop uses it while the registry is
// still at Version, and looks the group up itself otherwise (or when the
// change was not a message: a media that settled).
type Changed struct {
	Known      bool        // Group and Registered were read under Version
	Registered bool        // the chat is a registered group's
	Group      store.Group // the chat's group when Registered
	Version    uint64      // the registry's version (store.GroupQuery.Version) of the lookup
}

// Inbound stores one inbound message and its chat's metadata in one
// transaction (one write of the chat's row) and returns the message's stored id after the commit: the id
// already stored for a redelivery, 0 when the chat is not a registered group
// (only its metadata is recorded). A new message of a registered chat wakes
// the message loop at once. A non-nil error means nothing was stored.
func (in *Ingest) Inbound(ctx context.Context, m channel.Message) (store.MessageID, error) {
	return in.InboundSeen(ctx, Changed{}, m)
}

// Lookup looks chat's group up for a message on its way in: the one lookup
// of the message's group, for a channel that must know whether the chat is
// registered before it builds the message (WhatsApp builds text only for
// registered chats). InboundSeen then takes what it found.
func (in *Ingest) Lookup(ctx context.Context, chat string) (Changed, error) {
	return LookupChat(ctx, in.cfg.DB, chat)
}

// LookupChat is Lookup in db, for a channel that holds the store itself
// (the local chat checks that its chat is registered before it posts).
func LookupChat(ctx context.Context, db *store.DB, chat string) (Changed, error) {
	seen := Changed{Known: true, Version: db.Groups.Version()}
	g, err := db.Groups.ByChat(ctx, store.ChatID(chat))
	switch {
	case err == nil:
		seen.Group, seen.Registered = g, true
	case !errors.Is(err, store.ErrNotFound):
		return Changed{}, fmt.Errorf("look up chat %s: %w", chat, err)
	}
	return seen, nil
}

// InboundSeen is Inbound for a message whose chat Lookup found as seen;
// a seen not Known (the zero Changed) is looked up here.
func (in *Ingest) InboundSeen(ctx context.Context, seen Changed, m channel.Message) (store.MessageID, error) {
	return in.inbound(ctx, seen, m, nil)
}

// InboundPolled is Inbound for a message a polled channel received in the
// update ack (Telegram's getUpdates): the update is committed in the
// transaction that stores the message (store.PollTx.Ack), or alone when
// nothing of it is stored (an approval answer, a reaction). An error
// wrapping store.ErrExists means the update was committed before: nothing
// was stored again.
func (in *Ingest) InboundPolled(ctx context.Context, m channel.Message, ack store.PollAck) (store.MessageID, error) {
	return in.inbound(ctx, Changed{}, m, &ack)
}

func (in *Ingest) inbound(ctx context.Context, seen Changed, m channel.Message, ack *store.PollAck) (store.MessageID, error) {
	if strings.TrimSpace(m.Chat) == "" {
		return 0, fmt.Errorf("store inbound message: %w: empty chat id", store.ErrInvalid)
	}
	if in.cfg.Answers != nil && in.cfg.Answers(ctx, m) {
		in.log.Debug().Str("chat", m.Chat).Msg("approval answer or reaction taken out; not stored")
		return 0, in.ackAlone(ctx, ack)
	}
	if m.Reaction != nil {
		// A reaction is never a prompt and never stored.
		return 0, in.ackAlone(ctx, ack)
	}
	if m.ExternalID == "" {
		// Without the network's id a redelivery cannot be recognised;
		// store it under an id of our own rather than lose it.
		m.ExternalID = "bridged-in-" + uuid.NewString()
	}
	chat := store.ChatID(m.Chat)
	last := m.SentAt
	if last.IsZero() {
		last = in.cfg.Now()
	}
	chName := in.cfg.ChannelOf(m.Chat)
	var media *store.Media
	if m.Media != nil {
		if in.cfg.Media != nil {
			m.Text = m.Media.Text(m.Media.Pending())
		} else {
			m.Text = m.Media.Text("[" + m.Media.Label + ": not downloaded]")
		}
	}
	if !seen.Known || seen.Registered && seen.Group.Chat != chat {
		var err error
		if seen, err = in.Lookup(ctx, m.Chat); err != nil {
			return 0, fmt.Errorf("store inbound message: %w", err)
		}
	}
	notAllowed, dropped := allowed(seen, m)
	text, withMedia := m.Text, m.Media
	if dropped {
		text, withMedia = "", nil // only the chat is recorded
	}
	var id store.MessageID
	var inserted bool
	err := in.cfg.DB.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if ack != nil {
			if err := tx.Polls.Ack(ctx, *ack); err != nil {
				return err
			}
		}
		id, inserted, err = tx.Messages.InsertIn(ctx, store.Chat{ID: chat, Name: m.ChatName, Channel: chName, IsGroup: m.IsGroup, LastActivity: last}, store.Message{
			Chat: chat, ExternalID: m.ExternalID, Sender: m.Sender, SenderName: m.SenderName,
			Text: text, SentAt: m.SentAt, FromMe: m.FromMe, IsBot: m.IsBot, Mentioned: m.Mentioned,
			Late: m.Backlog || in.isLate(m.SentAt), NotAllowed: notAllowed,
		})
		if err != nil || !inserted || id == 0 || withMedia == nil || in.cfg.Media == nil {
			return err
		}
		media = mediaOf(id, chat, m.Media)
		return tx.Media.Insert(ctx, *media)
	})
	if err != nil {
		return 0, fmt.Errorf("store inbound message: %w", err)
	}
	if media != nil {
		in.cfg.Media.Add(*media)
	}
	if dropped {
		in.log.Debug().Str("chat", m.Chat).Str("sender", m.Sender).Msg("message from a sender not allowed dropped, as the group asks")
	}
	if !inserted || id == 0 || m.IsBot {
		return id, nil
	}
	in.mu.Lock()
	in.dirty[chat] = seen
	in.mu.Unlock()
	in.signal()
	in.log.Debug().Str("chat", m.Chat).Int64("message_id", int64(id)).Int("bytes", len(m.Text)).Msg("message stored")
	return id, nil
}

// ackAlone commits ack, when set, for an update that stores nothing.
func (in *Ingest) ackAlone(ctx context.Context, ack *store.PollAck) error {
	if ack == nil {
		return nil
	}
	if err := in.cfg.DB.Polls.Ack(ctx, *ack); err != nil {
		return fmt.Errorf("commit update: %w", err)
	}
	return nil
}

// allowed applies the allow list of m's group, if its chat is registered
// (seen): notAllowed when the list does not admit m's sender (stored as
// context), drop when the group wants such messages not stored at all. The
// owner's own messages and bridged's are always admitted. The group comes
// from the store's in-memory registry, not the insert's transaction: a
// message that races a change of the list is judged by the list before or
// after it, as if it had arrived a moment earlier or later.
func allowed(seen Changed, m channel.Message) (notAllowed, drop bool) {
	if !seen.Registered || m.FromMe || m.IsBot || strings.TrimSpace(m.Text) == "" && m.Media == nil {
		return false, false
	}
	if seen.Group.Admits(append([]string{m.Sender}, m.SenderAlt...), m.SenderAdmin) {
		return false, false
	}
	return true, seen.Group.Others == store.OthersDrop
}

// isLate reports whether a message sent at sentAt arrives late: through a
// backlog, more than Config.LateWindow after it was sent. (A message marked
// channel.Message.Backlog, from a history sync, is stored as late whatever
// its age.)
func (in *Ingest) isLate(sentAt time.Time) bool {
	return !sentAt.IsZero() && in.cfg.Now().Sub(sentAt) > in.cfg.LateWindow
}

// MediaSettled records that a media of chat settled (saved or failed, its
// placeholder written into the message): the messages it held back are
// pending now, so the message loop looks at the chat again.
func (in *Ingest) MediaSettled(chat store.ChatID) {
	in.mu.Lock()
	if _, ok := in.dirty[chat]; !ok {
		in.dirty[chat] = Changed{}
	}
	in.mu.Unlock()
	in.signal()
}

// Rescan has every group looked at again.
func (in *Ingest) Rescan() {
	in.mu.Lock()
	in.all = true
	in.mu.Unlock()
	in.signal()
}

// Wake receives a value after a chat changed (or Rescan); one value
// stands for any number of changes since the last Take.
func (in *Ingest) Wake() <-chan struct{} { return in.wake }

// Take returns the chats changed since the last Take, and whether every
// group is to be looked at, and starts a new set.
func (in *Ingest) Take() (map[store.ChatID]Changed, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	dirty, all := in.dirty, in.all
	in.dirty, in.all = map[store.ChatID]Changed{}, false
	return dirty, all
}

func (in *Ingest) signal() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// mediaOf is the media row of message id.
func mediaOf(id store.MessageID, chat store.ChatID, m *channel.Media) *store.Media {
	return &store.Media{
		MessageID: id, Chat: chat, Source: m.Source, Ref: m.Ref, Label: m.Label, Name: m.Name, MIME: m.MIME,
		Size: m.Size, Voice: m.Voice, Seconds: m.Seconds, Head: m.Head, Tail: m.Tail,
	}
}
