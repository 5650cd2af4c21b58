package store

import (
	"context"
	"fmt"
	"time"
)

// Usage is one agent turn's cost, copied from the CLI's result message.
type Usage struct {
	Folder       Folder
	SessionID    string
	CostUSD      float64
	InputTokens  int64
	OutputTokens int64
	DurationMS   int64
	NumTurns     int
	At           time.Time // zero: now
}

// AddUsage records u.
func (tx *Tx) AddUsage(ctx context.Context, u Usage) error {
	if u.At.IsZero() {
		u.At = tx.now()
	}
	if _, err := tx.tx.ExecContext(ctx, `INSERT INTO usage (folder, session_id, cost_usd, input_tokens, output_tokens, duration_ms, num_turns, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		u.Folder, u.SessionID, u.CostUSD, u.InputTokens, u.OutputTokens, u.DurationMS, u.NumTurns, toMS(u.At)); err != nil {
		return fmt.Errorf("add usage for %s: %w", u.Folder, err)
	}
	return nil
}

// AddUsage records one turn's usage (see Tx.AddUsage).
func (db *DB) AddUsage(ctx context.Context, u Usage) error {
	return db.Tx(ctx, func(tx *Tx) error { return tx.AddUsage(ctx, u) })
}

// CostSince returns the total cost in USD of the turns at or after since.
func (db *DB) CostSince(ctx context.Context, since time.Time) (float64, error) {
	var cost float64
	if err := db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE at >= ?`, toMS(since)).Scan(&cost); err != nil {
		return 0, fmt.Errorf("cost since %s: %w", since.Format(time.RFC3339), err)
	}
	return cost, nil
}

// GroupCostSince returns the total cost in USD of folder's turns at or
// after since.
func (db *DB) GroupCostSince(ctx context.Context, folder Folder, since time.Time) (float64, error) {
	var cost float64
	if err := db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE folder = ? AND at >= ?`, folder, toMS(since)).Scan(&cost); err != nil {
		return 0, fmt.Errorf("cost of %s since %s: %w", folder, since.Format(time.RFC3339), err)
	}
	return cost, nil
}
