package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sync"
	"time"
)

// Usage is one agent turn's cost, copied from the CLI's result message: a
// cross-check of the usage ledger (APIUsage), which is what budgets read.
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

// Add records u.
func (q *UsageTx) Add(ctx context.Context, u Usage) error {
	if u.At.IsZero() {
		u.At = q.tx.now()
	}
	if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO usage (folder, session_id, cost_usd, input_tokens, output_tokens, duration_ms, num_turns, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		u.Folder, u.SessionID, u.CostUSD, u.InputTokens, u.OutputTokens, u.DurationMS, u.NumTurns, toMS(u.At)); err != nil {
		return fmt.Errorf("add usage for %s: %w", u.Folder, err)
	}
	return nil
}

// Add records one turn's usage (see UsageTx.Add).
func (q *UsageQuery) Add(ctx context.Context, u Usage) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Usage.Add(ctx, u) })
}

// APIUsage is one Claude API response as the credential proxy metered and
// priced it: a row of the usage ledger, which budgets and the cost today
// read.
type APIUsage struct {
	Folder           Folder
	At               time.Time // zero: now
	Model            string
	InputTokens      int64
	OutputTokens     int64
	CacheWriteTokens int64
	CacheReadTokens  int64
	CostUSD          float64
}

// AddAPI commits u to the usage ledger in a transaction of its own. A
// negative or non-finite cost or token count is refused (ErrInvalid).
func (q *UsageQuery) AddAPI(ctx context.Context, u APIUsage) error {
	if u.At.IsZero() {
		u.At = q.db.now()
	}
	if u.CostUSD < 0 || math.IsNaN(u.CostUSD) || math.IsInf(u.CostUSD, 0) ||
		u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheWriteTokens < 0 || u.CacheReadTokens < 0 {
		return fmt.Errorf("%w: API usage of %s: cost %v, tokens %d/%d/%d/%d", ErrInvalid, u.Folder, u.CostUSD,
			u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheReadTokens)
	}
	q.db.spent.mu.Lock()
	defer q.db.spent.mu.Unlock()
	if q.db.spent.insert == nil {
		// Prepared once: the insert runs once per API request.
		st, err := q.db.write.PrepareContext(ctx, `INSERT INTO api_usage (folder, at, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("add API usage for %s: %w", u.Folder, err)
		}
		q.db.spent.insert = st
	}
	// One statement is its own transaction on the single write connection.
	if _, err := q.db.spent.insert.ExecContext(ctx,
		u.Folder, toMS(u.At), u.Model, u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheReadTokens, u.CostUSD); err != nil {
		return fmt.Errorf("add API usage for %s: %w", u.Folder, err)
	}
	if e, ok := q.db.spent.m[u.Folder]; ok && toMS(u.At) >= e.since {
		e.cost += u.CostUSD
		q.db.spent.m[u.Folder] = e
	}
	return nil
}

// spentCache keeps, per group, the ledger's total since the time last asked
// for (the start of the budget's day), so the check before each API request
// does not sum the day's rows again. Every ledger write goes through
// Usage.AddAPI, which adds to it under the same lock; pruning forgets it.
type spentCache struct {
	mu     sync.Mutex
	m      map[Folder]spentSince
	insert *sql.Stmt // Usage.AddAPI's, prepared on first use
}

type spentSince struct {
	since int64 // unix ms
	cost  float64
}

func (c *spentCache) forget() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}

// Usage.CostSince returns what every group's agent cost at or after since, in
// USD, from the usage ledger.
func (q *UsageQuery) CostSince(ctx context.Context, since time.Time) (float64, error) {
	var cost float64
	if err := q.db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM api_usage WHERE at >= ?`, toMS(since)).Scan(&cost); err != nil {
		return 0, fmt.Errorf("cost since %s: %w", since.Format(time.RFC3339), err)
	}
	return cost, nil
}

// Usage.GroupCostSince returns what folder's agent cost at or after since, in
// USD, from the usage ledger.
func (q *UsageQuery) GroupCostSince(ctx context.Context, folder Folder, since time.Time) (float64, error) {
	ms := toMS(since)
	q.db.spent.mu.Lock()
	defer q.db.spent.mu.Unlock()
	if e, ok := q.db.spent.m[folder]; ok && e.since == ms {
		return e.cost, nil
	}
	var cost float64
	if err := q.db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM api_usage WHERE folder = ? AND at >= ?`, folder, ms).Scan(&cost); err != nil {
		return 0, fmt.Errorf("cost of %s since %s: %w", folder, since.Format(time.RFC3339), err)
	}
	if q.db.spent.m == nil {
		q.db.spent.m = map[Folder]spentSince{}
	}
	q.db.spent.m[folder] = spentSince{since: ms, cost: cost}
	return cost, nil
}

// Usage.ReportedCostSince returns the total cost in USD the CLI reported for the
// turns at or after since: a cross-check of the ledger, never a budget's
// figure.
func (q *UsageQuery) ReportedCostSince(ctx context.Context, since time.Time) (float64, error) {
	var cost float64
	if err := q.db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE at >= ?`, toMS(since)).Scan(&cost); err != nil {
		return 0, fmt.Errorf("reported cost since %s: %w", since.Format(time.RFC3339), err)
	}
	return cost, nil
}
