package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Chat is a chat a channel has seen.
type Chat struct {
	ID           ChatID
	Name         string // empty when unknown
	Channel      string // "whatsapp", "local", …
	IsGroup      bool
	LastActivity time.Time
}

// Message is a stored message.
type Message struct {
	ID         MessageID // assigned by Messages.Insert
	Chat       ChatID
	ExternalID string // the channel's id, unique per chat
	Sender     string
	SenderName string
	Text       string
	SentAt     time.Time
	FromMe     bool // sent by the account bridged is logged in as
	IsBot      bool // sent by bridged (an id the outbox chose)
	Mentioned  bool // mentions the bot's own number or LID (counts as the trigger)
	// Late is set on a message that reached bridged long after it was
	// sent (a backlog): its trigger does not wake the agent.
	Late bool
	// NotAllowed is set on a message whose sender the group's allow list
	// did not admit when it arrived: context, never a trigger.
	NotAllowed bool
}

// An empty name or channel never overwrites a known one, a chat once seen as
// a group stays one, and the last activity only moves forward.
const upsertChatSQL = `INSERT INTO chats (id, name, channel, is_group, last_activity) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
	name = CASE WHEN excluded.name != '' THEN excluded.name ELSE chats.name END,
	channel = CASE WHEN excluded.channel != '' THEN excluded.channel ELSE chats.channel END,
	is_group = MAX(chats.is_group, excluded.is_group),
	last_activity = MAX(chats.last_activity, excluded.last_activity)`

const chatColumns = `id, name, channel, is_group, last_activity`

func scanChat(row rowScanner) (Chat, error) {
	var c Chat
	var last int64
	err := row.Scan(&c.ID, &c.Name, &c.Channel, &c.IsGroup, &last)
	c.LastActivity = fromMS(last)
	return c, err
}

// Upsert records c's metadata. An empty Name or Channel keeps the stored
// one; LastActivity only moves forward; a zero LastActivity leaves a known
// chat's alone and gives a new chat the current time (never the epoch, which
// would sort it last).
func (q *ChatTx) Upsert(ctx context.Context, c Chat) error {
	if c.ID == "" {
		return fmt.Errorf("upsert chat: %w: empty chat id", ErrInvalid)
	}
	var last int64
	if !c.LastActivity.IsZero() {
		last = toMS(c.LastActivity)
	} else if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO chats (id, last_activity) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
		c.ID, toMS(q.tx.now())); err != nil {
		return fmt.Errorf("upsert chat %s: %w", c.ID, err)
	}
	if _, err := q.tx.stx.ExecContext(ctx, upsertChatSQL, c.ID, c.Name, c.Channel, boolInt(c.IsGroup), last); err != nil {
		return fmt.Errorf("upsert chat %s: %w", c.ID, err)
	}
	return nil
}

// Upsert records c's metadata (see ChatTx.Upsert).
func (q *ChatQuery) Upsert(ctx context.Context, c Chat) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Chats.Upsert(ctx, c) })
}

// Get returns the chat with id, or an error wrapping ErrNotFound.
func (q *ChatQuery) Get(ctx context.Context, id ChatID) (Chat, error) {
	c, err := scanChat(q.db.read.QueryRowContext(ctx, `SELECT `+chatColumns+` FROM chats WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Chat{}, fmt.Errorf("get chat %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("get chat %s: %w", id, err)
	}
	return c, nil
}

// List returns every chat seen, most recently active first.
func (q *ChatQuery) List(ctx context.Context) ([]Chat, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+chatColumns+` FROM chats ORDER BY last_activity DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	out, err := collect(rows, scanChat)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	return out, nil
}

// Insert stores m and returns its id. It always records the chat
// (creating its row, moving its last activity forward). The text is stored
// only when the chat is a registered group and the text is not blank;
// otherwise nothing else is stored and it returns id 0, inserted false. A
// message already stored under the same (chat, external id) is not stored
// again: it returns the existing id and inserted false. A message whose
// external id the outbox chose is stored with IsBot set.
func (q *MessageTx) Insert(ctx context.Context, m Message) (id MessageID, inserted bool, err error) {
	return q.InsertIn(ctx, Chat{ID: m.Chat}, m)
}

// InsertIn is Messages.Insert recording the chat's metadata c too
// (as Chats.Upsert does; its LastActivity defaults to the message's time), in
// the one write of the chat's row the message makes.
func (q *MessageTx) InsertIn(ctx context.Context, c Chat, m Message) (id MessageID, inserted bool, err error) {
	if m.Chat == "" {
		return 0, false, fmt.Errorf("insert message: %w: empty chat id", ErrInvalid)
	}
	if c.ID != m.Chat {
		return 0, false, fmt.Errorf("insert message in %s: %w: chat metadata of %q", m.Chat, ErrInvalid, c.ID)
	}
	if m.ExternalID == "" {
		return 0, false, fmt.Errorf("insert message in %s: %w: empty external id", m.Chat, ErrInvalid)
	}
	if m.SentAt.IsZero() {
		m.SentAt = q.tx.now()
	}
	if c.LastActivity.IsZero() {
		c.LastActivity = m.SentAt
	}
	if _, err := q.tx.stx.ExecContext(ctx, upsertChatSQL, m.Chat, c.Name, c.Channel, boolInt(c.IsGroup), toMS(c.LastActivity)); err != nil {
		return 0, false, fmt.Errorf("insert message in %s: record chat: %w", m.Chat, err)
	}
	if strings.TrimSpace(m.Text) == "" {
		return 0, false, nil
	}
	var registered bool
	if err := q.tx.stx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM registered_groups WHERE chat = ?)`, m.Chat).Scan(&registered); err != nil {
		return 0, false, fmt.Errorf("insert message in %s: %w", m.Chat, err)
	}
	if !registered {
		return 0, false, nil
	}
	err = q.tx.stx.QueryRowContext(ctx, `SELECT id FROM messages WHERE chat = ? AND external_id = ?`, m.Chat, m.ExternalID).Scan(&id)
	switch {
	case err == nil:
		return id, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, false, fmt.Errorf("insert message in %s: %w", m.Chat, err)
	}
	if !m.IsBot {
		own, err := isOwnMessage(ctx, q.tx.stx, m.Chat, m.ExternalID)
		if err != nil {
			return 0, false, fmt.Errorf("insert message in %s: %w", m.Chat, err)
		}
		m.IsBot = own
	}
	res, err := q.tx.stx.ExecContext(ctx, `INSERT INTO messages (chat, external_id, sender, sender_name, text, sent_at, from_me, is_bot, mentioned, late, not_allowed, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.Chat, m.ExternalID, m.Sender, m.SenderName, m.Text, toMS(m.SentAt), boolInt(m.FromMe), boolInt(m.IsBot), boolInt(m.Mentioned), boolInt(m.Late), boolInt(m.NotAllowed), toMS(q.tx.now()))
	if err != nil {
		return 0, false, fmt.Errorf("insert message in %s: %w", m.Chat, err)
	}
	last, err := res.LastInsertId()
	if err != nil {
		return 0, false, fmt.Errorf("insert message in %s: %w", m.Chat, err)
	}
	return MessageID(last), true, nil
}

// Insert stores m (see MessageTx.Insert).
func (q *MessageQuery) Insert(ctx context.Context, m Message) (id MessageID, inserted bool, err error) {
	err = q.db.Tx(ctx, func(tx *Tx) error {
		var err error
		id, inserted, err = tx.Messages.Insert(ctx, m)
		return err
	})
	return id, inserted, err
}

const messageColumns = `id, chat, external_id, sender, sender_name, text, sent_at, from_me, is_bot, mentioned, late, not_allowed`

func scanMessage(row rowScanner) (Message, error) {
	var m Message
	var sent int64
	err := row.Scan(&m.ID, &m.Chat, &m.ExternalID, &m.Sender, &m.SenderName, &m.Text, &sent, &m.FromMe, &m.IsBot, &m.Mentioned, &m.Late, &m.NotAllowed)
	m.SentAt = fromMS(sent)
	return m, err
}

// After returns up to limit messages of chat with an id above after,
// in arrival order, both directions (bridged's own have IsBot set). A limit
// of 0 or less means no limit.
func (q *MessageQuery) After(ctx context.Context, chat ChatID, after MessageID, limit int) ([]Message, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE chat = ? AND id > ? ORDER BY id LIMIT ?`, chat, after, limit)
	if err != nil {
		return nil, fmt.Errorf("messages after %d in %s: %w", after, chat, err)
	}
	ms, err := collect(rows, scanMessage)
	if err != nil {
		return nil, fmt.Errorf("messages after %d in %s: %w", after, chat, err)
	}
	return ms, nil
}

// pendingWhere selects the messages of a chat (?) after a cursor (?) that
// people sent, up to the first whose media is still being fetched (chat and
// cursor again), or that belongs to a post of several files not all stored
// and settled yet (cursor again, then the time before which an incomplete
// post is let go): that one holds back itself and every later message,
// which wait for it, in order. A post's files carry the post's key and
// their count in their media's ref ({"post", "of"}): its turn takes them
// all at once.
const pendingWhere = `chat = ? AND id > ? AND is_bot = 0
	AND id < COALESCE((SELECT MIN(m.message_id) FROM media m WHERE m.chat = ? AND m.message_id > ? AND (m.state = 'pending'
		OR (json_valid(m.ref) AND json_extract(m.ref, '$.of') > 1
			AND (SELECT COUNT(*) FROM media p WHERE p.chat = m.chat AND p.message_id > ? AND p.state != 'pending'
				AND json_valid(p.ref) AND json_extract(p.ref, '$.post') = json_extract(m.ref, '$.post')) < json_extract(m.ref, '$.of')
			AND (m.created_at > ? OR (SELECT COUNT(*) FROM media p WHERE p.chat = m.chat AND p.message_id > ?
				AND json_valid(p.ref) AND json_extract(p.ref, '$.post') = json_extract(m.ref, '$.post')) >= json_extract(m.ref, '$.of'))))), 9223372036854775807)`

// PostWait is how long the stored files of a post whose other files were
// never stored (the post failed half-way) hold the chat's later messages.
const PostWait = 2 * time.Minute

// Pending returns the messages people sent to chat after the cursor
// after (IsBot messages are skipped): the newest limit of them, in arrival
// order, and how many older ones were left out. It stops before the first
// message whose media is pending, or whose post of several files is not
// all stored and settled: that one and every later one wait until it
// settled (Media.Settle). A limit of 0 or less means
// no limit.
func (q *MessageQuery) Pending(ctx context.Context, chat ChatID, after MessageID, limit int) (msgs []Message, omitted int, err error) {
	if limit <= 0 {
		limit = -1
	}
	cutoff := toMS(q.db.now().Add(-PostWait))
	err = q.db.readTx(ctx, func(q querier) error {
		var total int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE `+pendingWhere,
			chat, after, chat, after, after, cutoff, after).Scan(&total); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
			WHERE `+pendingWhere+` ORDER BY id DESC LIMIT ?`, chat, after, chat, after, after, cutoff, after, limit)
		if err != nil {
			return err
		}
		if msgs, err = collect(rows, scanMessage); err != nil {
			return err
		}
		omitted = total - len(msgs)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("pending messages after %d in %s: %w", after, chat, err)
	}
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	return msgs, omitted, nil
}

// LatestID returns the id of chat's newest stored message, 0 if none.
func (q *MessageQuery) LatestID(ctx context.Context, chat ChatID) (MessageID, error) {
	var id MessageID
	if err := q.db.read.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM messages WHERE chat = ?`, chat).Scan(&id); err != nil {
		return 0, fmt.Errorf("latest message in %s: %w", chat, err)
	}
	return id, nil
}
