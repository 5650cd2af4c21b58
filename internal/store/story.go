package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TurnEnd is how one agent turn of a chat ended (the turns hub's record):
// Upto is the newest message id the turn took.
type TurnEnd struct {
	Chat              ChatID
	Upto              MessageID
	Result            string // done, failed (retried), gave_up
	Reason            string
	Attempt, Attempts int
	At                time.Time // zero: now
}

// Add records e.
func (q *TurnQuery) Add(ctx context.Context, e TurnEnd) error {
	if e.At.IsZero() {
		e.At = q.db.now()
	}
	return q.db.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.stx.ExecContext(ctx, `INSERT INTO turn_ends (chat, upto, result, reason, attempt, attempts, at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			e.Chat, e.Upto, e.Result, e.Reason, e.Attempt, e.Attempts, toMS(e.At)); err != nil {
			return fmt.Errorf("add turn end of %s: %w", e.Chat, err)
		}
		return nil
	})
}

// From returns the ends of chat's turns that took message id or a
// later one (Upto >= id), oldest first, at most limit.
func (q *TurnQuery) From(ctx context.Context, chat ChatID, id MessageID, limit int) ([]TurnEnd, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT chat, upto, result, reason, attempt, attempts, at FROM turn_ends
		WHERE chat = ? AND upto >= ? ORDER BY at, id LIMIT ?`, chat, id, limit)
	if err != nil {
		return nil, fmt.Errorf("turn ends of %s: %w", chat, err)
	}
	defer rows.Close()
	var out []TurnEnd
	for rows.Next() {
		var e TurnEnd
		var at int64
		if err := rows.Scan(&e.Chat, &e.Upto, &e.Result, &e.Reason, &e.Attempt, &e.Attempts, &at); err != nil {
			return nil, fmt.Errorf("turn ends of %s: %w", chat, err)
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// StoredMessage is a message with the time bridged stored it (zero when
// not recorded: stored before bridged kept it) and its chat's channel.
type StoredMessage struct {
	Message
	StoredAt time.Time
	Channel  string
}

// GetStored returns message id, or ErrNotFound.
func (q *MessageQuery) GetStored(ctx context.Context, id MessageID) (StoredMessage, error) {
	return q.stored(ctx, `m.id = ?`, id)
}

// LastFrom returns the newest message of chat (empty: of any chat)
// not sent by bridged, or ErrNotFound.
func (q *MessageQuery) LastFrom(ctx context.Context, chat ChatID) (StoredMessage, error) {
	if chat == "" {
		return q.stored(ctx, `m.id = (SELECT id FROM messages WHERE is_bot = 0 AND ? = '' ORDER BY id DESC LIMIT 1)`, chat)
	}
	return q.stored(ctx, `m.id = (SELECT id FROM messages WHERE chat = ? AND is_bot = 0 ORDER BY id DESC LIMIT 1)`, chat)
}

func (q *MessageQuery) stored(ctx context.Context, where string, arg any) (StoredMessage, error) {
	var sm StoredMessage
	var sent, stored int64
	m := &sm.Message
	err := q.db.read.QueryRowContext(ctx, `SELECT m.id, m.chat, m.external_id, m.sender, m.sender_name, m.text, m.sent_at,
		m.from_me, m.is_bot, m.mentioned, m.late, m.not_allowed, m.stored_at, COALESCE(c.channel, '')
		FROM messages m LEFT JOIN chats c ON c.id = m.chat WHERE `+where, arg).
		Scan(&m.ID, &m.Chat, &m.ExternalID, &m.Sender, &m.SenderName, &m.Text, &sent, &m.FromMe, &m.IsBot, &m.Mentioned, &m.Late, &m.NotAllowed, &stored, &sm.Channel)
	if errors.Is(err, sql.ErrNoRows) {
		return StoredMessage{}, fmt.Errorf("message: %w", ErrNotFound)
	}
	if err != nil {
		return StoredMessage{}, fmt.Errorf("message: %w", err)
	}
	m.SentAt = fromMS(sent)
	if stored > 0 {
		sm.StoredAt = fromMS(stored)
	}
	return sm, nil
}

// NextAfter returns the id and stored time of the first message of
// chat after id that bridged did not send and that is not late, 0 if none:
// the end of the span a message's answer is looked for in.
func (q *MessageQuery) NextAfter(ctx context.Context, chat ChatID, id MessageID) (MessageID, time.Time, error) {
	var next, stored, sent int64
	err := q.db.read.QueryRowContext(ctx, `SELECT id, stored_at, sent_at FROM messages WHERE chat = ? AND id > ? AND is_bot = 0 AND late = 0 ORDER BY id LIMIT 1`, chat, id).
		Scan(&next, &stored, &sent)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("next message in %s: %w", chat, err)
	}
	if stored == 0 {
		stored = sent
	}
	return MessageID(next), fromMS(stored), nil
}

// Between returns the outbox rows to chat, or from folder's agent to
// any chat, created in [from, to) (to zero: no end), oldest first, at most
// limit.
func (q *OutboxQuery) Between(ctx context.Context, chat ChatID, folder Folder, from, to time.Time, limit int) ([]OutboxItem, error) {
	end := int64(1<<63 - 1)
	if !to.IsZero() {
		end = toMS(to)
	}
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE id IN (
			SELECT id FROM outbox WHERE chat = ? AND created_at >= ? AND created_at < ?
			UNION SELECT id FROM outbox WHERE folder = ? AND folder != '' AND created_at >= ? AND created_at < ?)
		ORDER BY id LIMIT ?`,
		chat, toMS(from), end, folder, toMS(from), end, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox of %s: %w", chat, err)
	}
	defer rows.Close()
	var out []OutboxItem
	for rows.Next() {
		it, err := scanOutbox(rows)
		if err != nil {
			return nil, fmt.Errorf("outbox of %s: %w", chat, err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// APIBetween sums folder's usage ledger rows in [from, to] (to zero: no
// end): how many requests, their cost, and the first and last one's time.
func (q *UsageQuery) APIBetween(ctx context.Context, folder Folder, from, to time.Time) (requests int, cost float64, first, last time.Time, err error) {
	end := int64(1<<63 - 1)
	if !to.IsZero() {
		end = toMS(to)
	}
	var lo, hi sql.NullInt64
	err = q.db.read.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(cost_usd), 0), MIN(at), MAX(at) FROM api_usage WHERE folder = ? AND at >= ? AND at <= ?`,
		folder, toMS(from), end).Scan(&requests, &cost, &lo, &hi)
	if err != nil {
		return 0, 0, first, last, fmt.Errorf("usage of %s: %w", folder, err)
	}
	if lo.Valid {
		first, last = fromMS(lo.Int64), fromMS(hi.Int64)
	}
	return requests, cost, first, last, nil
}
