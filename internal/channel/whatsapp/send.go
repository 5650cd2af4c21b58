package whatsapp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
)

// MaxMessageRunes is the longest single message bridged sends. WhatsApp
// accepts far more (about 65,000 characters), but phones fold long messages
// behind "Read more" and a reply cut into readable parts is easier to follow,
// so longer text is split at paragraph, then sentence, then word boundaries.
const MaxMessageRunes = 2000

// NewMessageID returns a fresh message id in WhatsApp web's format ("3EB0"
// and 16 upper-case hex digits).
func NewMessageID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "3EB0" + strings.ToUpper(hex.EncodeToString(b[:]))
}

// MessageID is the WhatsApp id Send uses for the first message of an
// Outgoing with ID id: id itself when it already has WhatsApp's form (upper
// case hex, as NewMessageID makes), otherwise an id derived from it by
// hashing, so every retry uses the same one.
func MessageID(id string) string {
	if isWAID(id) {
		return id
	}
	return deriveID(id, 0)
}

// PartID is the id of split part n (0-based) of the message whose first
// part has id first. Part 0 is first itself.
func PartID(first string, n int) string {
	if n == 0 {
		return first
	}
	return deriveID(first, n)
}

func deriveID(base string, n int) string {
	sum := sha256.Sum256([]byte(base + "\x00" + strconv.Itoa(n)))
	return "3EB0" + strings.ToUpper(hex.EncodeToString(sum[:8]))
}

func isWAID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

// sender owns what is sent: text split into parts and files uploaded,
// each under an id derived from the outbox's, and the ids recently sent.
type sender struct {
	*core
	conn     *connection
	restrict *restrictions
	sent     *recentIDs // shared with inbound, which recognises their echoes
}

// send is Client.Send.
func (c *sender) send(ctx context.Context, m channel.Outgoing) (string, error) {
	to, err := parseChat(m.Chat)
	if err != nil {
		return "", err
	}
	switch st := c.conn.state(); st {
	case channel.StateNotPaired, channel.StateLoggedOut:
		return "", fmt.Errorf("send to %s: whatsapp is %s (run `bridged login`): %w", m.Chat, st, channel.ErrPermanent)
	}
	if err := c.restrict.refuse(ctx, m.Chat, to); err != nil {
		return "", err
	}
	text := strings.TrimSpace(m.Text)
	if text == "" && m.Attachment == nil {
		return "", fmt.Errorf("send to %s: empty message: %w", m.Chat, channel.ErrPermanent)
	}
	prefix := ""
	if c.opts.SharedNumber {
		prefix = c.opts.AssistantName + ": "
	}
	var parts []string
	if text != "" {
		parts = splitText(text, MaxMessageRunes-utf8.RuneCountInString(prefix))
	}
	id := m.ID
	if id == "" {
		id = NewMessageID()
	}
	first := MessageID(id)
	n := 0 // the index of the next part
	if a := m.Attachment; a != nil {
		// The file is part 0, with the first text part as its caption
		// when its kind takes one; the rest of the text follows it.
		caption := ""
		if a.Kind != channel.KindAudio && len(parts) > 0 {
			caption, parts = withPrefix(parts[0], prefix), parts[1:]
		}
		if !c.sent.has(first) {
			msg, err := c.mediaMessage(ctx, *a, caption)
			if err != nil {
				return "", fmt.Errorf("send %s to %s: %w", a.Name, m.Chat, err)
			}
			if _, err := c.wa.SendMessage(ctx, to, msg, whatsmeow.SendRequestExtra{ID: first}); err != nil {
				return "", fmt.Errorf("send %s to %s: %w", a.Name, m.Chat, c.restrict.sendError(ctx, to, err))
			}
			c.sent.add(first)
		}
		n = 1
	}
	total := n + len(parts)
	for i, part := range parts {
		pid := PartID(first, n+i)
		if c.sent.has(pid) {
			continue
		}
		_, err := c.wa.SendMessage(ctx, to, &waE2E.Message{Conversation: proto.String(withPrefix(part, prefix))},
			whatsmeow.SendRequestExtra{ID: pid})
		if err != nil {
			return "", fmt.Errorf("send part %d/%d to %s: %w", n+i+1, total, m.Chat, c.restrict.sendError(ctx, to, err))
		}
		c.sent.add(pid)
	}
	c.log.Debug().Str("chat", m.Chat).Str("message_id", first).Int("parts", total).Msg("sent WhatsApp message")
	return first, nil
}

// withPrefix puts prefix (the assistant's name on a shared number) before
// part once.
func withPrefix(part, prefix string) string {
	if prefix != "" && !strings.HasPrefix(part, prefix) {
		return prefix + part
	}
	return part
}

// mediaMessage uploads the file of a and returns the message that shows it:
// an image or a document with caption, or audio (a voice note when it is
// Ogg Opus, which is what WhatsApp records). A file that is gone is a
// permanent failure.
func (c *sender) mediaMessage(ctx context.Context, a channel.Attachment, caption string) (*waE2E.Message, error) {
	data, err := os.ReadFile(a.Path)
	if err != nil {
		return nil, permanentError{fmt.Errorf("read the file: %w", err)}
	}
	mediaType := whatsmeow.MediaDocument
	switch a.Kind {
	case channel.KindImage:
		mediaType = whatsmeow.MediaImage
	case channel.KindAudio:
		mediaType = whatsmeow.MediaAudio
	}
	up, err := c.wa.Upload(ctx, data, mediaType)
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	mimeType := a.MIME
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	var captionPtr *string
	if caption != "" {
		captionPtr = proto.String(caption)
	}
	switch a.Kind {
	case channel.KindImage:
		return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
			Caption: captionPtr, Mimetype: proto.String(mimeType),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
		}}, nil
	case channel.KindAudio:
		voice := mimeType == "audio/ogg"
		if voice {
			mimeType = "audio/ogg; codecs=opus"
		}
		return &waE2E.Message{AudioMessage: &waE2E.AudioMessage{
			Mimetype: proto.String(mimeType), PTT: proto.Bool(voice),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
		}}, nil
	}
	return &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
		Caption: captionPtr, Mimetype: proto.String(mimeType), Title: proto.String(a.Name), FileName: proto.String(a.Name),
		URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
		FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
	}}, nil
}

// parseChat validates a chat id bridged can send to.
func parseChat(chat string) (types.JID, error) {
	jid, err := types.ParseJID(chat)
	if err != nil || jid.User == "" {
		return types.EmptyJID, fmt.Errorf("invalid whatsapp chat %q: %w", chat, channel.ErrPermanent)
	}
	switch jid.Server {
	case types.GroupServer, types.DefaultUserServer, types.HiddenUserServer:
		return jid.ToNonAD(), nil
	}
	return types.EmptyJID, fmt.Errorf("cannot send to whatsapp chat %q: %w", chat, channel.ErrPermanent)
}

// permanentError keeps the reason and marks it permanent.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() []error {
	return []error{e.err, channel.ErrPermanent}
}

// classifySendError marks the failures a retry cannot fix.
func classifySendError(err error) error {
	for _, perm := range []error{
		whatsmeow.ErrServerReturnedError, // WhatsApp answered with an error code
		whatsmeow.ErrNotInGroup,
		whatsmeow.ErrGroupNotFound,
		whatsmeow.ErrUnknownServer,
		whatsmeow.ErrRecipientADJID,
		whatsmeow.ErrBroadcastListUnsupported,
		whatsmeow.ErrNotLoggedIn,
	} {
		if errors.Is(err, perm) {
			return permanentError{err}
		}
	}
	return err
}

// splitText cuts text into parts of at most limit runes, preferring
// paragraph, then line, then sentence, then word boundaries.
func splitText(text string, limit int) []string {
	if limit < 1 {
		limit = 1
	}
	text = strings.TrimSpace(text)
	if utf8.RuneCountInString(text) <= limit {
		return []string{text}
	}
	var parts []string
	var cur strings.Builder
	curLen := 0
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			parts = append(parts, s)
		}
		cur.Reset()
		curLen = 0
	}
	for _, piece := range pieces(text, limit) {
		n := utf8.RuneCountInString(piece.text)
		sepLen := utf8.RuneCountInString(piece.sep)
		if curLen > 0 && curLen+sepLen+n > limit {
			flush()
		}
		if curLen > 0 {
			cur.WriteString(piece.sep)
			curLen += sepLen
		}
		cur.WriteString(piece.text)
		curLen += n
	}
	flush()
	return parts
}

type piece struct {
	sep  string // what joined it to the previous piece
	text string
}

// pieces breaks text into units of at most limit runes along the coarsest
// boundaries that make them fit.
func pieces(text string, limit int) []piece {
	levels := []struct {
		sep   string
		split func(string) []string
	}{
		{"\n\n", func(s string) []string { return strings.Split(s, "\n\n") }},
		{"\n", func(s string) []string { return strings.Split(s, "\n") }},
		{" ", splitSentences},
		{" ", strings.Fields},
	}
	var walk func(s, sep string, level int) []piece
	walk = func(s, sep string, level int) []piece {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil
		}
		if utf8.RuneCountInString(s) <= limit {
			return []piece{{sep: sep, text: s}}
		}
		if level == len(levels) {
			// A single word longer than the limit: cut it.
			var out []piece
			r := []rune(s)
			for len(r) > 0 {
				n := min(limit, len(r))
				out = append(out, piece{sep: sep, text: string(r[:n])})
				sep = ""
				r = r[n:]
			}
			return out
		}
		var out []piece
		for i, sub := range levels[level].split(s) {
			subSep := levels[level].sep
			if i == 0 {
				subSep = sep
			}
			got := walk(sub, subSep, level+1)
			if len(got) > 0 && len(out) == 0 {
				got[0].sep = sep
			}
			out = append(out, got...)
		}
		return out
	}
	return walk(text, "", 0)
}

// splitSentences splits after ". ", "! " and "? ".
func splitSentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i+1 < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && s[i+1] == ' ' {
			out = append(out, s[start:i+1])
			start = i + 2
		}
	}
	return append(out, s[start:])
}

// recentIDs remembers the last n ids sent by this process, to skip parts
// already delivered on a retry and to recognise their echoes.
type recentIDs struct {
	mu    sync.Mutex
	set   map[string]struct{}
	order []string
	next  int
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{set: make(map[string]struct{}), order: make([]string, n)}
}

func (r *recentIDs) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[id]; ok {
		return
	}
	if old := r.order[r.next]; old != "" {
		delete(r.set, old)
	}
	r.order[r.next] = id
	r.next = (r.next + 1) % len(r.order)
	r.set[id] = struct{}{}
}

func (r *recentIDs) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[id]
	return ok
}
