package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// autoCheckpoint is SQLite's default: the writer's commit that makes the
// write-ahead log this many pages long copies it into the database.
const autoCheckpoint = 1000

// Pruned counts the rows one Prune batch removed, by kind.
type Pruned struct {
	Messages int // behind their group's stored cursor
	Outbox   int // sent or failed, never pending
	TaskRuns int // finished, never running
	Usage    int // folded into usage_daily (the CLI's rows) or api_usage_daily (the ledger's) first
	// Held is how long the batch held the writer: from the start of its
	// transaction to its commit (summed by Add).
	Held time.Duration
}

// Total is the number of rows removed.
func (p Pruned) Total() int { return p.Messages + p.Outbox + p.TaskRuns + p.Usage }

// Add sums two counts.
func (p Pruned) Add(q Pruned) Pruned {
	return Pruned{p.Messages + q.Messages, p.Outbox + q.Outbox, p.TaskRuns + q.TaskRuns, p.Usage + q.Usage, p.Held + q.Held}
}

// Prune removes at most limit rows of each kind older than before, in one
// write transaction, and reports how many went; fewer than limit of every
// kind means nothing older is left to prune. It removes only what nothing
// needs any more:
//
//   - messages of a registered chat that are at or behind its group's stored
//     cursor (handed to the agent and answered) and sent before before; a
//     chat with no cursor yet, or no longer registered (its group may be
//     added back and resume from its cursor), keeps all its messages;
//   - outbox rows that were sent or finally failed before before; a pending
//     row is never removed;
//   - task runs that finished and started before before; a running one is
//     never removed;
//   - usage rows from before before, each first added to its group's day
//     (UTC) in usage_daily, in the same transaction; and so the usage
//     ledger's rows (api_usage) into api_usage_daily;
//   - what a message's story is told from: turn ends and the budget's
//     decisions made before before.
//
// Sessions, cursors, groups, tasks and chats are never pruned. Pruned.Held
// says how long the batch held the writer (the wait for it left out), so a
// caller can size the next batch by it.
func (db *DB) Prune(ctx context.Context, before time.Time, limit int) (Pruned, error) {
	var p Pruned
	cut := toMS(before)
	var began time.Time
	err := db.Tx(ctx, func(tx *Tx) error {
		began = time.Now()
		q := tx.stx
		// Its commit does not checkpoint the write-ahead log, which would
		// copy the log's pages into the database while every writer waits
		// (SQLite does at the commit that makes the log autoCheckpoint
		// pages long; a batch, writing hundreds, is the commit most likely
		// to): the caller checkpoints between batches, beside the writer
		// (Checkpoint). Set back after the commit.
		if _, err := q.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		// Each batch is found through indexes and reads about the rows it
		// removes: a chat's oldest messages first (by time), never sorted
		// as a whole, so a batch costs the same however much is left.
		res, err := q.ExecContext(ctx, `DELETE FROM messages WHERE id IN (
			SELECT m.id FROM registered_groups g
			CROSS JOIN cursors c ON c.folder = g.folder
			CROSS JOIN messages m INDEXED BY messages_chat_sent ON m.chat = g.chat AND m.sent_at < ?
			WHERE m.id <= c.message_id LIMIT ?)`, cut, limit)
		if err != nil {
			return fmt.Errorf("prune messages: %w", err)
		}
		p.Messages = affected(res)
		// Sent rows, then failed ones, each through its partial index.
		res, err = q.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (
			SELECT id FROM outbox INDEXED BY outbox_sent_at WHERE state = 'sent' AND sent_at < ? ORDER BY sent_at LIMIT ?)`, cut, limit)
		if err != nil {
			return fmt.Errorf("prune outbox: %w", err)
		}
		p.Outbox = affected(res)
		res, err = q.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (
			SELECT id FROM outbox INDEXED BY outbox_failed WHERE state = 'failed' AND failed_at < ? ORDER BY failed_at LIMIT ?)`, cut, limit-p.Outbox)
		if err != nil {
			return fmt.Errorf("prune outbox: %w", err)
		}
		p.Outbox += affected(res)
		res, err = q.ExecContext(ctx, `DELETE FROM task_runs WHERE id IN (
			SELECT id FROM task_runs WHERE status != 'running' AND started_at < ? ORDER BY started_at LIMIT ?)`, cut, limit)
		if err != nil {
			return fmt.Errorf("prune task runs: %w", err)
		}
		p.TaskRuns = affected(res)
		if _, err = q.ExecContext(ctx, `DELETE FROM turn_ends WHERE id IN (
			SELECT id FROM turn_ends WHERE at < ? ORDER BY at LIMIT ?)`, cut, limit); err != nil {
			return fmt.Errorf("prune turn ends: %w", err)
		}
		if _, err = q.ExecContext(ctx, `DELETE FROM budget_decisions WHERE id IN (
			SELECT id FROM budget_decisions WHERE at < ? ORDER BY at LIMIT ?)`, cut, limit); err != nil {
			return fmt.Errorf("prune budget decisions: %w", err)
		}

		// Fold the batch of usage rows into their days, then remove them.
		if _, err := q.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS prune_usage (id INTEGER PRIMARY KEY)`); err != nil {
			return fmt.Errorf("prune usage: %w", err)
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM temp.prune_usage`); err != nil {
			return fmt.Errorf("prune usage: %w", err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO temp.prune_usage (id)
			SELECT id FROM usage WHERE at < ? ORDER BY at LIMIT ?`, cut, limit); err != nil {
			return fmt.Errorf("prune usage: %w", err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO usage_daily (folder, day, turns, cost_usd, input_tokens, output_tokens, duration_ms, num_turns)
			SELECT folder, strftime('%Y-%m-%d', at / 1000, 'unixepoch'), COUNT(*), SUM(cost_usd), SUM(input_tokens), SUM(output_tokens), SUM(duration_ms), SUM(num_turns)
			FROM usage WHERE id IN (SELECT id FROM temp.prune_usage) GROUP BY 1, 2
			ON CONFLICT (folder, day) DO UPDATE SET
				turns = turns + excluded.turns,
				cost_usd = cost_usd + excluded.cost_usd,
				input_tokens = input_tokens + excluded.input_tokens,
				output_tokens = output_tokens + excluded.output_tokens,
				duration_ms = duration_ms + excluded.duration_ms,
				num_turns = num_turns + excluded.num_turns`); err != nil {
			return fmt.Errorf("fold usage into days: %w", err)
		}
		res, err = q.ExecContext(ctx, `DELETE FROM usage WHERE id IN (SELECT id FROM temp.prune_usage)`)
		if err != nil {
			return fmt.Errorf("prune usage: %w", err)
		}
		p.Usage = affected(res)

		// The same for the usage ledger.
		if _, err := q.ExecContext(ctx, `DELETE FROM temp.prune_usage`); err != nil {
			return fmt.Errorf("prune API usage: %w", err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO temp.prune_usage (id)
			SELECT id FROM api_usage INDEXED BY api_usage_at WHERE at < ? ORDER BY at LIMIT ?`, cut, limit); err != nil {
			return fmt.Errorf("prune API usage: %w", err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO api_usage_daily (folder, day, requests, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd)
			SELECT folder, strftime('%Y-%m-%d', at / 1000, 'unixepoch'), COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cache_write_tokens), SUM(cache_read_tokens), SUM(cost_usd)
			FROM api_usage WHERE id IN (SELECT id FROM temp.prune_usage) GROUP BY 1, 2
			ON CONFLICT (folder, day) DO UPDATE SET
				requests = requests + excluded.requests,
				input_tokens = input_tokens + excluded.input_tokens,
				output_tokens = output_tokens + excluded.output_tokens,
				cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
				cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
				cost_usd = cost_usd + excluded.cost_usd`); err != nil {
			return fmt.Errorf("fold API usage into days: %w", err)
		}
		res, err = q.ExecContext(ctx, `DELETE FROM api_usage WHERE id IN (SELECT id FROM temp.prune_usage)`)
		if err != nil {
			return fmt.Errorf("prune API usage: %w", err)
		}
		// Both count as usage: under the limit only when neither has more
		// left (a sum at the limit costs at most one more, empty, batch).
		p.Usage += affected(res)
		return nil
	})
	p.Held = time.Since(began)
	// Back to SQLite's default for every other commit, whether or not the
	// batch committed (and if ctx ended, all the same).
	if _, rerr := db.write.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA wal_autocheckpoint = %d`, autoCheckpoint)); rerr != nil {
		err = errors.Join(err, fmt.Errorf("prune: %w", rerr))
	}
	if err != nil {
		return Pruned{}, err
	}
	// A pruned row may have been in a cached total.
	db.spent.forget()
	return p, nil
}

func affected(res interface{ RowsAffected() (int64, error) }) int {
	n, _ := res.RowsAffected()
	return int(n)
}

// DailyUsage is one group's usage on one UTC day, folded from pruned rows.
type DailyUsage struct {
	Folder       Folder
	Day          string // YYYY-MM-DD, UTC
	Turns        int
	CostUSD      float64
	InputTokens  int64
	OutputTokens int64
	DurationMS   int64
	NumTurns     int
}

// ByDay lists the folded daily usage, by day then group.
func (q *UsageQuery) ByDay(ctx context.Context) ([]DailyUsage, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT folder, day, turns, cost_usd, input_tokens, output_tokens, duration_ms, num_turns
		FROM usage_daily ORDER BY day, folder`)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	defer rows.Close()
	var out []DailyUsage
	for rows.Next() {
		var d DailyUsage
		if err := rows.Scan(&d.Folder, &d.Day, &d.Turns, &d.CostUSD, &d.InputTokens, &d.OutputTokens, &d.DurationMS, &d.NumTurns); err != nil {
			return nil, fmt.Errorf("usage by day: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	return out, nil
}

// Checkpoint copies what the write-ahead log holds into the database, on a
// reading connection and without waiting for readers (SQLite's passive
// checkpoint), and blocks until done or ctx ends. SQLite checkpoints the
// log itself at the commit that makes it 1,000 pages long, on the one
// writer connection, which everything that writes then waits behind: a
// caller that writes many pages (a prune) checkpoints between its batches,
// so no commit finds the log that long, and a checkpoint never holds the
// writer. It returns how many pages the log held.
func (db *DB) Checkpoint(ctx context.Context) (int, error) {
	var busy, logged, done int
	if err := db.read.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logged, &done); err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	return logged, nil
}

// Size is the database's size in bytes (its pages, free ones included; the
// write-ahead log is not counted).
func (db *DB) Size(ctx context.Context) (int64, error) {
	var n int64
	if err := db.read.QueryRowContext(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	return n, nil
}
