// Package retention prunes what bridged's database no longer needs, in the
// background: answered messages, sent (or finally failed) outbox rows,
// finished task runs and raw usage rows (folded into daily totals per group
// first), once they are older than BRIDGED_RETENTION (store.DB.Prune says
// exactly what is kept).
//
// The copies of files agents sent (the spool, data/outbox/) go too once
// they are older than the retention and their message is no longer
// pending.
//
// A pass runs a minute after the daemon starts and then every hour. It
// deletes in small batches (Batch rows of each kind per write transaction)
// with a pause between them, so the router and the outbox sender, which
// share the one writer connection, never wait long behind it. A retention of
// 0 keeps everything. The database file does not shrink: SQLite reuses the
// freed pages, so it stops growing.
package retention

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
)

// Defaults.
const (
	DefaultFirst = time.Minute
	DefaultEvery = time.Hour
	DefaultBatch = 500
	DefaultPause = 200 * time.Millisecond
)

// Store is the database part the pruner uses (store.DB).
type Store interface {
	// Prune removes at most limit rows of each kind older than before, in
	// one write transaction; it blocks until done or ctx ends.
	Prune(ctx context.Context, before time.Time, limit int) (store.Pruned, error)
}

// Files is the spool of files sent with messages (home.Spool).
type Files interface {
	// Prune removes the copies kept before `before` whose outbox row done
	// reports sent, failed or deleted, and returns how many went.
	Prune(before time.Time, done func(id int64) (bool, error)) (int, error)
}

// OutboxRows looks up outbox rows (store.DB); a Store that has it lets the
// pruner prune Files.
type OutboxRows interface {
	GetOutbox(ctx context.Context, id store.OutboxID) (store.OutboxItem, error)
}

// Pruner prunes old rows in the background.
type Pruner struct {
	DB    Store
	Files Files         // nil: no spool to prune
	Keep  time.Duration // the retention; 0 keeps everything
	Now   func() time.Time
	Log   zerolog.Logger
	// First is the delay before the first pass, Every the time between
	// passes, Batch the rows of each kind per transaction, Pause the wait
	// between transactions. Zero values take the defaults.
	First, Every time.Duration
	Batch        int
	Pause        time.Duration
}

func (p *Pruner) defaults() {
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.First == 0 {
		p.First = DefaultFirst
	}
	if p.Every == 0 {
		p.Every = DefaultEvery
	}
	if p.Batch == 0 {
		p.Batch = DefaultBatch
	}
	if p.Pause == 0 {
		p.Pause = DefaultPause
	}
}

// Run prunes until ctx ends, then returns nil. A failed pass is logged and
// tried again at the next one.
func (p *Pruner) Run(ctx context.Context) error {
	p.defaults()
	log := p.Log.With().Str("component", "retention").Logger()
	if p.Keep == 0 {
		log.Info().Msg("retention is 0: nothing is pruned")
		return nil
	}
	timer := time.NewTimer(p.First)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		n, err := p.Pass(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Error().Err(err).Msg("pruning stopped; trying again at the next pass")
		case n.Total() > 0:
			log.Info().Int("messages", n.Messages).Int("outbox", n.Outbox).Int("task_runs", n.TaskRuns).Int("usage", n.Usage).
				Dur("retention", p.Keep).Msg("pruned old rows")
		}
		timer.Reset(p.Every)
	}
}

// Pass prunes everything older than the retention, batch by batch, and
// returns how many rows went. It blocks until done or ctx ends.
func (p *Pruner) Pass(ctx context.Context) (store.Pruned, error) {
	p.defaults()
	var total store.Pruned
	before := p.Now().Add(-p.Keep)
	for {
		n, err := p.DB.Prune(ctx, before, p.Batch)
		if err != nil {
			return total, err
		}
		total = total.Add(n)
		if max(n.Messages, n.Outbox, n.TaskRuns, n.Usage) < p.Batch {
			return total, p.pruneFiles(ctx, before)
		}
		t := time.NewTimer(p.Pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return total, ctx.Err()
		case <-t.C:
		}
	}
}

// pruneFiles removes the spooled copies of messages older than before that
// are no longer pending.
func (p *Pruner) pruneFiles(ctx context.Context, before time.Time) error {
	rows, ok := p.DB.(OutboxRows)
	if p.Files == nil || !ok {
		return nil
	}
	n, err := p.Files.Prune(before, func(id int64) (bool, error) {
		it, err := rows.GetOutbox(ctx, store.OutboxID(id))
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return it.State != store.OutboxPending, nil
	})
	if n > 0 {
		p.Log.Info().Str("component", "retention").Int("files", n).Dur("retention", p.Keep).Msg("pruned old sent files")
	}
	return err
}
