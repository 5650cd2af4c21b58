package store

import (
	"context"
	"fmt"
	"time"
)

// EverStored returns how many messages were ever stored: the highest
// message id handed out (ids are never reused), read from SQLite's own
// counter, so it costs the same at any store size.
func (q *MessageQuery) EverStored(ctx context.Context) (int64, error) {
	var n int64
	if err := q.db.read.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0)`).Scan(&n); err != nil {
		return 0, fmt.Errorf("messages stored: %w", err)
	}
	return n, nil
}

// ChatCounts are a chat's messages in some span: in from people, out from
// bridged.
type ChatCounts struct{ In, Out int64 }

// CountSinceByChat counts the messages each registered group's chat
// sent since since, in one statement that reads only those messages (an
// index on each chat's messages by time): what CountSince tells of one
// chat, for every group at once. Chats without a message are left out.
func (q *MessageQuery) CountSinceByChat(ctx context.Context, since time.Time) (map[ChatID]ChatCounts, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT g.chat, SUM(m.is_bot = 0), SUM(m.is_bot = 1)
		FROM registered_groups g CROSS JOIN messages m INDEXED BY messages_chat_sent ON m.chat = g.chat AND m.sent_at >= ?
		GROUP BY g.chat`, toMS(since))
	if err != nil {
		return nil, fmt.Errorf("count messages since %s: %w", since.Format(time.RFC3339), err)
	}
	defer rows.Close()
	out := map[ChatID]ChatCounts{}
	for rows.Next() {
		var chat ChatID
		var c ChatCounts
		if err := rows.Scan(&chat, &c.In, &c.Out); err != nil {
			return nil, fmt.Errorf("count messages since %s: %w", since.Format(time.RFC3339), err)
		}
		out[chat] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count messages since %s: %w", since.Format(time.RFC3339), err)
	}
	return out, nil
}
