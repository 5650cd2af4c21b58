package store

import (
	"context"
	"fmt"
	"time"
)

// Recent returns the newest limit messages of chat, both
// directions, oldest first.
func (q *MessageQuery) Recent(ctx context.Context, chat ChatID, limit int) ([]Message, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+messageColumns+` FROM (SELECT * FROM messages
		WHERE chat = ? ORDER BY id DESC LIMIT ?) ORDER BY id`, chat, limit)
	if err != nil {
		return nil, fmt.Errorf("recent messages of %s: %w", chat, err)
	}
	ms, err := collect(rows, scanMessage)
	if err != nil {
		return nil, fmt.Errorf("recent messages of %s: %w", chat, err)
	}
	return ms, nil
}

// HourlyCost is one group's metered cost (the usage ledger) in one hour.
type HourlyCost struct {
	Folder  Folder
	Hour    time.Time // the hour's start, UTC
	CostUSD float64
}

// Usage.CostByHour sums the usage ledger by group and hour since since (the
// hours a timezone folds into its days).
func (q *UsageQuery) CostByHour(ctx context.Context, since time.Time) ([]HourlyCost, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT folder, at / 3600000 AS h, SUM(cost_usd) FROM api_usage INDEXED BY api_usage_at
		WHERE at >= ? GROUP BY folder, h ORDER BY h, folder`, toMS(since))
	if err != nil {
		return nil, fmt.Errorf("cost by hour: %w", err)
	}
	defer rows.Close()
	var out []HourlyCost
	for rows.Next() {
		var c HourlyCost
		var h int64
		if err := rows.Scan(&c.Folder, &h, &c.CostUSD); err != nil {
			return nil, fmt.Errorf("cost by hour: %w", err)
		}
		c.Hour = fromMS(h * 3600000)
		out = append(out, c)
	}
	return out, rows.Err()
}

// TurnLatency is one answered turn: when it ended and how long after the
// newest message it took was stored. Approval is the part of that time its
// group's approval requests waited for the owner (asked in that time; an
// open one counts until the turn's end).
type TurnLatency struct {
	Chat     ChatID
	At       time.Time
	Latency  time.Duration
	Approval time.Duration
}

// Latencies lists the answered turns of chat (empty: of every chat)
// that ended since since, oldest first, at most limit.
func (q *TurnQuery) Latencies(ctx context.Context, chat ChatID, since time.Time, limit int) ([]TurnLatency, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT t.chat, t.at, t.at - m.stored_at,
		COALESCE((SELECT SUM(MIN(IIF(a.decided_at = 0, t.at, a.decided_at), t.at) - a.asked_at)
			FROM approvals a INDEXED BY approvals_folder_asked JOIN registered_groups g ON g.folder = a.folder
			WHERE g.chat = t.chat AND a.asked_at >= m.stored_at AND a.asked_at < t.at), 0)
		FROM turn_ends t JOIN messages m ON m.id = t.upto
		WHERE t.result = 'done' AND m.stored_at > 0 AND t.at >= ? AND (? = '' OR t.chat = ?)
		ORDER BY t.at DESC LIMIT ?`, toMS(since), chat, chat, limit)
	if err != nil {
		return nil, fmt.Errorf("turn latencies: %w", err)
	}
	defer rows.Close()
	var out []TurnLatency
	for rows.Next() {
		var l TurnLatency
		var at, ms, wait int64
		if err := rows.Scan(&l.Chat, &at, &ms, &wait); err != nil {
			return nil, fmt.Errorf("turn latencies: %w", err)
		}
		l.At, l.Latency = fromMS(at), time.Duration(max(ms, 0))*time.Millisecond
		l.Approval = min(time.Duration(max(wait, 0))*time.Millisecond, l.Latency)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("turn latencies: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// HourlyMessages counts the messages of one hour: in from people, out from
// bridged.
type HourlyMessages struct {
	Hour    time.Time // the hour's start, UTC
	In, Out int
}

// ByHour counts the messages of chat (empty: of every chat) sent
// since since, by hour, oldest first; hours without messages are left out.
func (q *MessageQuery) ByHour(ctx context.Context, chat ChatID, since time.Time) ([]HourlyMessages, error) {
	// One chat's: its own messages of the span, from the index alone. Every
	// chat's: each registered group's chat the same way (messages are
	// stored for registered groups only).
	query, args := `SELECT sent_at / 3600000 AS h, SUM(is_bot = 0), SUM(is_bot = 1) FROM messages INDEXED BY messages_chat_sent
		WHERE chat = ? AND sent_at >= ? GROUP BY h ORDER BY h`, []any{chat, toMS(since)}
	if chat == "" {
		query, args = `SELECT m.sent_at / 3600000 AS h, SUM(m.is_bot = 0), SUM(m.is_bot = 1)
			FROM registered_groups g CROSS JOIN messages m INDEXED BY messages_chat_sent ON m.chat = g.chat AND m.sent_at >= ?
			GROUP BY h ORDER BY h`, []any{toMS(since)}
	}
	rows, err := q.db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("messages by hour: %w", err)
	}
	defer rows.Close()
	var out []HourlyMessages
	for rows.Next() {
		var m HourlyMessages
		var h int64
		if err := rows.Scan(&h, &m.In, &m.Out); err != nil {
			return nil, fmt.Errorf("messages by hour: %w", err)
		}
		m.Hour = fromMS(h * 3600000)
		out = append(out, m)
	}
	return out, rows.Err()
}

// ByHourAfter counts, by hour, the messages of every registered group's
// chat sent since since and stored after the message after (0: every
// one), and returns the newest message id it counted up to: a caller that
// keeps the counts asks next time only for what was stored since, reading
// those rows alone (a range of ids), whatever the store's size.
func (q *MessageQuery) ByHourAfter(ctx context.Context, after MessageID, since time.Time) ([]HourlyMessages, MessageID, error) {
	var out []HourlyMessages
	var last MessageID
	err := q.db.readTx(ctx, func(tx querier) error {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM messages`).Scan(&last); err != nil {
			return err
		}
		// The first time, each chat's span from the index; then the rows
		// stored since, by id.
		query := `SELECT m.sent_at / 3600000 AS h, SUM(m.is_bot = 0), SUM(m.is_bot = 1)
			FROM registered_groups g CROSS JOIN messages m INDEXED BY messages_chat_sent ON m.chat = g.chat AND m.sent_at >= ?
			WHERE m.id > ? AND m.id <= ? GROUP BY h ORDER BY h`
		if after > 0 {
			query = `SELECT sent_at / 3600000 AS h, SUM(is_bot = 0), SUM(is_bot = 1) FROM messages
				WHERE sent_at >= ? AND id > ? AND id <= ? AND chat IN (SELECT chat FROM registered_groups) GROUP BY h ORDER BY h`
		}
		rows, err := tx.QueryContext(ctx, query, toMS(since), after, last)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m HourlyMessages
			var h int64
			if err := rows.Scan(&h, &m.In, &m.Out); err != nil {
				return err
			}
			m.Hour = fromMS(h * 3600000)
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("messages by hour after %d: %w", after, err)
	}
	return out, last, nil
}
