// Package local is the local channel: chats named "local:<name>" that live
// only in bridged's own database. The control API reaches it (Post to talk,
// Wait to long-poll for what was stored), which is how `bridged chat` and the
// end-to-end tests talk to agents without WhatsApp.
//
// An inbound message goes through the Inbound given to New (the ingest's
// Inbound stores it and wakes the router) that returns the stored id, so Post answers with that id and
// never reads back what it just posted. An outbound message is "delivered" by storing it in
// the messages table (IsBot, FromMe, the outbox's id as external id, the
// assistant's name as sender); the outbox's Outbox.MarkSent then finds the row under
// the same (chat, external id) and does not store it again. Every stored
// message wakes the long-poll waiters after its row is committed.
//
// A file sent with a message is delivered into the channel's own directory
// (KeepFiles; data/local/<chat name>~<message id>/ in the daemon; an older
// bridged wrote data/local/<message id>/), hard-linked from the outbox's
// copy, which the outbox removes once the message is sent: the local chat's
// reader still finds the file, and the retention removes it with the
// message's row. What one chat keeps there is capped (KeepLimits): a file
// past the cap is not delivered, and the message says so in its place.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
)

// Name is the channel's name.
const Name = "local"

// Prefix starts every local chat id.
const Prefix = "local:"

// Errors returned by Post.
var (
	// ErrNotLocal means the chat id is not a local chat ("local:<name>").
	ErrNotLocal = errors.New("not a local chat")
	// ErrNotRegistered means no group is registered for the chat, so the
	// message would not be stored.
	ErrNotRegistered = errors.New("chat is not a registered group")
	// ErrEmpty means the text is blank.
	ErrEmpty = errors.New("empty message")
	// ErrBadSender means PostAs was given no name, or one with spaces.
	ErrBadSender = errors.New("want a sender name without spaces")
)

// Inbound stores m, whose chat's group is seen (the one lookup of its
// group: ingest.Ingest.InboundSeen), and returns its id only after the
// commit; id 0 means the chat is not a registered group and only its
// metadata was recorded. A non-nil error means nothing was stored.
type Inbound func(ctx context.Context, seen ingest.Changed, m channel.Message) (store.MessageID, error)

// Channel is the local channel. It is safe for concurrent use.
type Channel struct {
	db        *store.DB
	assistant string
	log       zerolog.Logger
	now       func() time.Time
	since     time.Time

	in Inbound

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a local message is stored
	typing  map[string]bool

	files string // where delivered files are kept; "" shows the outbox's copy
	keep  KeepLimits
}

// KeepLimits caps the files one local chat keeps delivered: at most Files
// files and Bytes bytes, a file's bytes being the larger of its size and
// the disk blocks it takes (so neither a sparse nor a padded file hides
// its weight). 0: no cap. The retention removes old ones.
type KeepLimits struct {
	Files int
	Bytes int64
}

// ErrKeepCap is the error of a file not delivered because its chat keeps
// as many files, or as many bytes, as its KeepLimits allow.
var ErrKeepCap = errors.New("the chat's delivered files are at their cap")

// KeepFiles has the channel deliver the files sent with messages into dir
// (one subdirectory per message), a daemon-owned directory on the same
// file system as the outbox's copies, each chat keeping at most lim. Call
// it before the channel is used.
func (c *Channel) KeepFiles(dir string, lim KeepLimits) *Channel {
	c.files, c.keep = dir, lim
	return c
}

// keepSep separates a chat's name from a message id in the name of a
// delivered file's directory: no chat name holds it.
const keepSep = "~"

// deliverFile links (or, across file systems, copies) the outbox's copy a
// into the channel's directory under chat's name and the message id, and
// returns a with its new path. A file already there (a retried send) is
// kept. A file that would take chat past its KeepLimits is not delivered:
// the error wraps ErrKeepCap and says what the chat keeps.
func (c *Channel) deliverFile(chat, id string, a channel.Attachment) (channel.Attachment, error) {
	if c.files == "" {
		return a, nil
	}
	if strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") || id == "" {
		return a, fmt.Errorf("unsafe message id %q", id)
	}
	name := strings.TrimPrefix(chat, Prefix)
	dir := filepath.Join(c.files, name+keepSep+id)
	dst := filepath.Join(dir, filepath.Base(a.Name))
	if _, err := os.Lstat(dst); err == nil {
		a.Path = dst
		return a, nil
	}
	if err := c.checkKeep(name, a); err != nil {
		return a, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return a, err
	}
	if err := os.Link(a.Path, dst); err != nil {
		if err := copyFile(a.Path, dst); err != nil {
			return a, err
		}
	}
	a.Path = dst
	return a, nil
}

// checkKeep refuses a, for the chat named name, when with it the chat would
// keep more files or bytes than c.keep allows.
func (c *Channel) checkKeep(name string, a channel.Attachment) error {
	if c.keep.Files <= 0 && c.keep.Bytes <= 0 {
		return nil
	}
	files, bytes, err := keptFiles(c.files, name+keepSep)
	if err != nil {
		return fmt.Errorf("count the chat's delivered files: %w", err)
	}
	size := a.Size
	if fi, err := os.Stat(a.Path); err == nil {
		size = diskBytes(fi)
	}
	switch {
	case c.keep.Files > 0 && files+1 > c.keep.Files:
		return fmt.Errorf("%w: it keeps %d files, the most a local chat keeps (BRIDGED_LOCAL_FILES=%d)", ErrKeepCap, files, c.keep.Files)
	case c.keep.Bytes > 0 && bytes+size > c.keep.Bytes:
		return fmt.Errorf("%w: with this one it would keep %s, over the %s a local chat keeps (BRIDGED_LOCAL_FILES_BYTES)",
			ErrKeepCap, sizeText(bytes+size), sizeText(c.keep.Bytes))
	}
	return nil
}

// keptFiles counts the regular files, and their bytes (diskBytes), in the
// directories of dir whose names start with prefix. A directory that is
// gone meanwhile (the retention) counts nothing.
func keptFiles(dir, prefix string) (files int, bytes int64, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		inner, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		for _, f := range inner {
			fi, err := f.Info()
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			files++
			bytes += diskBytes(fi)
		}
	}
	return files, bytes, nil
}

// diskBytes is what a file weighs: the larger of its size and the bytes of
// the disk blocks it takes.
func diskBytes(fi fs.FileInfo) int64 {
	n := fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n = max(n, int64(st.Blocks)*512)
	}
	return n
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}

var _ channel.Channel = (*Channel)(nil)

// New returns the local channel over db. assistantName is the sender of
// outbound messages; in stores what is posted (it must not be nil).
func New(db *store.DB, assistantName string, in Inbound, log zerolog.Logger) *Channel {
	return &Channel{
		db:        db,
		in:        in,
		assistant: assistantName,
		log:       log.With().Str("component", "local").Logger(),
		now:       time.Now,
		since:     time.Now(),
		changed:   make(chan struct{}),
		typing:    make(map[string]bool),
	}
}

// IsLocal reports whether chat is a local chat id.
func IsLocal(chat string) bool {
	return strings.HasPrefix(chat, Prefix) && len(chat) > len(Prefix)
}

// Name returns "local".
func (c *Channel) Name() string { return Name }

// Owns reports whether chat is a local chat. It does not block.
func (c *Channel) Owns(chat string) bool { return IsLocal(chat) }

// Connect returns nil at once: the local channel is always connected.
func (c *Channel) Connect(ctx context.Context) error { return nil }

// Status reports the channel as connected since it was created.
func (c *Channel) Status() channel.Status {
	return channel.Status{State: channel.StateConnected, Since: c.since}
}

// SetTyping records whether the agent is working in chat (see Typing).
func (c *Channel) SetTyping(ctx context.Context, chat string, on bool) error {
	if !IsLocal(chat) {
		return fmt.Errorf("set typing in %s: %w", chat, ErrNotLocal)
	}
	c.mu.Lock()
	if on {
		c.typing[chat] = true
	} else {
		delete(c.typing, chat)
	}
	c.mu.Unlock()
	return nil
}

// Typing reports whether the agent of chat is working, as last set by
// SetTyping.
func (c *Channel) Typing(chat string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.typing[chat]
}

// Send stores m as a message from the assistant (IsBot, FromMe, external id
// m.ID) and wakes the waiters. A file sent with it is stored as a last line
// naming it and where its copy is (FileLine), which is what `bridged chat`
// shows. It returns m.ID. A chat that is not local or
// not registered is a permanent failure: nobody could ever read the message.
func (c *Channel) Send(ctx context.Context, m channel.Outgoing) (string, error) {
	if !IsLocal(m.Chat) {
		return "", fmt.Errorf("send to %s: %w: %w", m.Chat, ErrNotLocal, channel.ErrPermanent)
	}
	if strings.TrimSpace(m.Text) == "" {
		return "", fmt.Errorf("send to %s: %w: %w", m.Chat, ErrEmpty, channel.ErrPermanent)
	}
	id := m.ID
	if id == "" {
		id = store.NewExternalID()
	}
	text := m.Text
	if m.Attachment != nil {
		a, err := c.deliverFile(m.Chat, id, *m.Attachment)
		switch {
		case errors.Is(err, ErrKeepCap):
			// The message is delivered, saying what became of its file.
			c.log.Warn().Str("chat", m.Chat).Str("file", a.Name).Int64("bytes", a.Size).Msg("file not delivered: the chat's files are at their cap")
			text = strings.TrimRight(text, "\n") + "\n" + fmt.Sprintf("[file not delivered: %s (%s, %s): %v]",
				a.Name, sizeText(a.Size), a.Kind, err)
		case err != nil:
			return "", fmt.Errorf("send to %s: deliver %s: %w", m.Chat, m.Attachment.Name, err)
		default:
			text = strings.TrimRight(text, "\n") + "\n" + FileLine(a)
		}
	}
	stored, _, err := c.db.Messages.Insert(ctx, store.Message{
		Chat:       store.ChatID(m.Chat),
		ExternalID: id,
		Sender:     c.assistant,
		SenderName: c.assistant,
		Text:       text,
		SentAt:     c.now(),
		FromMe:     true,
		IsBot:      true,
	})
	if err != nil {
		return "", fmt.Errorf("send to %s: %w", m.Chat, err)
	}
	if stored == 0 {
		return "", fmt.Errorf("send to %s: %w: %w", m.Chat, ErrNotRegistered, channel.ErrPermanent)
	}
	c.notify()
	return id, nil
}

// Post delivers a message from the owner (the terminal's user, named
// sender; "you" when empty) to chat through the inbound callback and
// returns its stored id once it is committed. The owner's messages are
// FromMe, as the owner's own on WhatsApp: they always count, whatever the
// group's allow list. The chat must be a local chat registered as a group.
//
// With media (files already in the uploads spool, see channel.Media), it
// posts one message per media, in order: the first carries text as its
// caption (text may then be empty), the others have none. The ids returned
// are those of the messages committed, in order, even when an error stops
// the rest: a media whose message was not committed is the caller's to
// clean up.
func (c *Channel) Post(ctx context.Context, chat, sender, text string, media ...channel.Media) ([]store.MessageID, error) {
	if strings.TrimSpace(sender) == "" {
		sender = "you"
	}
	return c.post(ctx, chat, sender, sender, true, text, media)
}

// PostAs is Post from another member of the chat, named name: its sender id
// is "local:<name>", the form a group's allow list names it by, and it is
// not FromMe. A message the group's allow list does not admit is stored as
// context, or, when the group drops such messages, not stored: PostAs then
// returns ErrNotAllowed.
func (c *Channel) PostAs(ctx context.Context, chat, name, text string, media ...channel.Media) ([]store.MessageID, error) {
	name = strings.TrimSpace(name)
	if name == "" || strings.ContainsAny(name, " \t\r\n") {
		return nil, fmt.Errorf("post to %s as %q: %w", chat, name, ErrBadSender)
	}
	return c.post(ctx, chat, Prefix+name, name, false, text, media)
}

func (c *Channel) post(ctx context.Context, chat, sender, senderName string, owner bool, text string, media []channel.Media) ([]store.MessageID, error) {
	if !IsLocal(chat) {
		return nil, fmt.Errorf("post to %s: %w", chat, ErrNotLocal)
	}
	if strings.TrimSpace(text) == "" && len(media) == 0 {
		return nil, fmt.Errorf("post to %s: %w", chat, ErrEmpty)
	}
	// The one lookup of the messages' group: the ingest takes what it
	// found.
	seen, err := ingest.LookupChat(ctx, c.db, chat)
	if err != nil {
		return nil, fmt.Errorf("post to %s: %w", chat, err)
	}
	if !seen.Registered {
		return nil, fmt.Errorf("post to %s: %w", chat, ErrNotRegistered)
	}
	msgs := []channel.Message{{Text: text}}
	if len(media) > 0 {
		msgs = make([]channel.Message, len(media))
		for i := range media {
			m := media[i]
			m.Head, m.Tail = "", ""
			if i == 0 && strings.TrimSpace(text) != "" {
				m.Head = text + "\n"
			}
			msgs[i] = channel.Message{Text: m.Text(m.Pending()), Media: &m}
		}
	}
	ids := make([]store.MessageID, 0, len(msgs))
	defer func() {
		if len(ids) > 0 {
			c.notify()
		}
	}()
	for _, m := range msgs {
		m.Chat = chat
		m.ChatName = strings.TrimPrefix(chat, Prefix)
		m.ExternalID = "local-" + uuid.NewString()
		m.Sender, m.SenderName, m.FromMe = sender, senderName, owner
		m.SentAt = c.now()
		id, err := c.in(ctx, seen, m)
		if err != nil {
			return ids, fmt.Errorf("post to %s: %w", chat, err)
		}
		if id == 0 {
			if g, err := c.db.Groups.ByChat(ctx, store.ChatID(chat)); err == nil {
				if owner || g.Others != store.OthersDrop {
					// Taken out before storage (an approval answer, a
					// /remote-control command or its refusal).
					c.log.Debug().Str("chat", chat).Msg("local message taken as an answer; not stored")
					continue
				}
				// Registered: the group drops messages from senders it
				// does not allow (never the owner's).
				return ids, fmt.Errorf("post to %s as %s: %w: the group does not store messages from senders it does not allow", chat, senderName, store.ErrNotAllowed)
			}
			// Unregistered between the check and the commit.
			return ids, fmt.Errorf("post to %s: %w", chat, ErrNotRegistered)
		}
		ids = append(ids, id)
		c.log.Debug().Str("chat", chat).Int64("id", int64(id)).Bool("media", m.Media != nil).Msg("local message stored")
	}
	return ids, nil
}

// Wait returns a channel that is closed when the next message (inbound or
// outbound) is stored in a local chat after the call. Call Wait before
// reading what is stored, then wait on the channel, and no message is missed.
// ctx is not retained.
func (c *Channel) Wait(ctx context.Context) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// notify wakes every waiter.
func (c *Channel) notify() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// FileLine is how a local chat shows a file the assistant sent: its name,
// size and kind, and the path of the daemon's copy, e.g.
// "[file: chart.png (3.0 KiB, image) /home/…/data/outbox/7-3EB0…/chart.png]".
func FileLine(a channel.Attachment) string {
	return fmt.Sprintf("[file: %s (%s, %s) %s]", a.Name, sizeText(a.Size), a.Kind, a.Path)
}

// sizeText is a byte count for people: "512 B", "12.3 KiB", "4.0 MiB".
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
