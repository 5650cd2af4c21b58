package store

import (
	"context"
	"fmt"
)

// Messages.HasWritten reports whether chat has a stored message it sent itself (not
// from this account): under WhatsApp's reachout timelock only such chats
// may still be written to.
func (q *MessageQuery) HasWritten(ctx context.Context, chat ChatID) (bool, error) {
	var ok bool
	if err := q.db.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE chat = ? AND from_me = 0)`, chat).Scan(&ok); err != nil {
		return false, fmt.Errorf("messages from %s: %w", chat, err)
	}
	return ok, nil
}
