package store

import (
	"context"
	"fmt"
)

// Stats are counts for `bridged status` and /metrics.
type Stats struct {
	Chats         int
	Groups        int
	PendingOutbox int
	FailedOutbox  int
	ActiveTasks   int
	PausedTasks   int
	PendingMedia  int // inbound media not fetched yet
}

// Stats counts chats, groups, outbox rows, tasks and pending media in one
// snapshot.
func (db *DB) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := db.read.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM chats),
		(SELECT COUNT(*) FROM registered_groups),
		(SELECT COUNT(*) FROM outbox WHERE state = 'pending'),
		(SELECT COUNT(*) FROM outbox WHERE state = 'failed'),
		(SELECT COUNT(*) FROM tasks WHERE status IN ('active', 'running')),
		(SELECT COUNT(*) FROM tasks WHERE status = 'paused'),
		(SELECT COUNT(*) FROM media WHERE state = 'pending')`).
		Scan(&s.Chats, &s.Groups, &s.PendingOutbox, &s.FailedOutbox, &s.ActiveTasks, &s.PausedTasks, &s.PendingMedia)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return s, nil
}
