package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// PollAck is one update of a polled channel (Telegram's update_id),
// committed in the transaction that stores what it carried: the channel's
// offset moves past it there, so a crash before the commit has the network
// send it again and a crash after finds it committed.
type PollAck struct {
	Channel  string
	UpdateID int64
}

// Next returns the id of channel's next update not yet committed (0 when
// none was).
func (q *PollQuery) Next(ctx context.Context, channel string) (int64, error) {
	var next int64
	err := q.db.read.QueryRowContext(ctx, `SELECT next FROM poll_offsets WHERE channel = ?`, channel).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("poll offset of %s: %w", channel, err)
	}
	return next, nil
}

// Ack commits a, an update that stores nothing else (an update of a kind
// bridged ignores), in its own transaction. ErrExists: it was committed
// before.
func (q *PollQuery) Ack(ctx context.Context, a PollAck) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Polls.Ack(ctx, a) })
}

// Ack moves a.Channel's offset past a.UpdateID inside the transaction.
// ErrExists when the offset is past it already (the update was committed:
// the transaction must store nothing of it again).
func (q PollTx) Ack(ctx context.Context, a PollAck) error {
	if a.Channel == "" || a.UpdateID < 0 {
		return fmt.Errorf("commit update: %w: a channel and an update id are required", ErrInvalid)
	}
	res, err := q.tx.stx.ExecContext(ctx, `INSERT INTO poll_offsets (channel, next, polled_at) VALUES (?, ?, ?)
		ON CONFLICT (channel) DO UPDATE SET next = excluded.next, polled_at = excluded.polled_at WHERE poll_offsets.next <= ?`,
		a.Channel, a.UpdateID+1, toMS(q.tx.now()), a.UpdateID)
	if err != nil {
		return fmt.Errorf("commit update %d of %s: %w", a.UpdateID, a.Channel, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("commit update %d of %s: %w", a.UpdateID, a.Channel, err)
	} else if n == 0 {
		return fmt.Errorf("commit update %d of %s: %w", a.UpdateID, a.Channel, ErrExists)
	}
	return nil
}
