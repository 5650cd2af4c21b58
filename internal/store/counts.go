package store

import (
	"context"
	"fmt"
	"time"
)

// CountSince counts chat's messages sent since since: in (from people)
// and out (bridged's own).
func (q *MessageQuery) CountSince(ctx context.Context, chat ChatID, since time.Time) (in, out int64, err error) {
	err = q.db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(is_bot = 0), 0), COALESCE(SUM(is_bot = 1), 0) FROM messages WHERE chat = ? AND sent_at >= ?`,
		chat, toMS(since)).Scan(&in, &out)
	if err != nil {
		return 0, 0, fmt.Errorf("count messages of %s: %w", chat, err)
	}
	return in, out, nil
}
