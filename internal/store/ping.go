package store

import (
	"context"
	"fmt"
)

// Ping checks that the database takes a write: it begins a write
// transaction (which waits for the one writer connection and for SQLite's
// write lock) and rolls it back. It blocks until then or until ctx ends. A
// writer held by a call that never returns, or a lock another process keeps,
// makes it fail, which is what the daemon's watchdog looks for.
func (db *DB) Ping(ctx context.Context) error {
	stx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	if err := stx.Rollback(); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
