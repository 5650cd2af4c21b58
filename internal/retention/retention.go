// Package retention prunes what bridged's database no longer needs, in the
// background: answered messages, sent (or finally failed) outbox rows,
// finished task runs and raw usage rows (folded into daily totals per group
// first), once they are older than BRIDGED_RETENTION (store.DB.Prune says
// exactly what is kept).
//
// The copies of files agents sent (the spool, data/outbox/) are removed by
// the outbox sender once their message is sent; a pass removes the ones a
// crash left behind: an hour after they were staged, once their message is
// no longer pending (whatever the retention).
//
// The records of what each turn changed in its group's folder and memory
// (internal/snapshot) go after the retention too, with the stored objects
// only they reached.
//
// The files kept per run and per message go too: run logs
// (data/logs/<folder>/) after BRIDGED_LOG_RETENTION, the media saved in
// each group's inbox/ after BRIDGED_INBOX_RETENTION (0 keeps them), and the
// files delivered to local chats (data/local/) and the Claude session
// transcripts (data/sessions/<folder>/.claude/**.jsonl) after the
// retention, the transcripts of the session each group resumes next aside.
//
// A pass runs a minute after the daemon starts and then every hour. It
// deletes in small batches (at most Batch rows of each kind per write
// transaction) with a pause between them, so the router and the outbox
// sender, which share the one writer connection, never wait long behind
// it. Each batch finds its rows through indexes, so it costs what its rows
// cost however much is left; its size follows the time it held the writer
// (Hold): a pass starts small, halves the batch after one that held the
// writer longer than Hold and doubles it (up to Batch) after one under half
// of it, so a cold cache or a loaded machine makes batches smaller rather
// than longer; between batches the pass checkpoints the database's
// write-ahead log beside the writer (Checkpointer), so no batch's commit
// does it while others wait. A pass of many batches (the first after an
// upgrade or a shorter retention) logs that it started and its progress. A retention of
// 0 keeps every row (and the files of local chats). The database file does not shrink: SQLite reuses the
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
	// A batch of 100 rows of each kind holds the writer for a few ms (its
	// rows are found through indexes, so at any store size); the pause
	// leaves the writer free most of the time meanwhile. DefaultBatch is
	// the most; a pass starts at FirstBatch and sizes each batch by the
	// time the one before held the writer against DefaultHold (see
	// batchSize).
	DefaultBatch = 100
	FirstBatch   = 10
	DefaultHold  = 10 * time.Millisecond
	DefaultPause = 50 * time.Millisecond
	// ProgressEvery is how often a pass that takes many batches logs how
	// far it got.
	ProgressEvery = 10 * time.Second
)

// Store is the database part the pruner uses (store.DB).
type Store interface {
	// Prune removes at most limit rows of each kind older than before, in
	// one write transaction, and says how long it held the writer
	// (Pruned.Held); it blocks until done or ctx ends.
	Prune(ctx context.Context, before time.Time, limit int) (store.Pruned, error)
}

// Checkpointer is a Store that can copy its write-ahead log into the
// database without holding the writer (store.DB.Checkpoint); a pass that
// has it checkpoints after each batch, so no commit of the router's or
// the outbox's finds a long log to copy while others wait for the writer.
type Checkpointer interface {
	// Checkpoint returns the pages the log held; it blocks until done
	// or ctx ends.
	Checkpoint(ctx context.Context) (int, error)
}

// Files is the spool of files sent with messages (home.Spool).
type Files interface {
	// Prune removes the copies kept before `before` whose outbox row done
	// reports sent, failed or deleted, and returns how many went.
	Prune(before time.Time, done func(id int64) (bool, error)) (int, error)
}

// Trees are the files the daemon keeps per run and per message
// (home.Home).
type Trees interface {
	// PruneRunLogs removes the run logs last written before `before`.
	PruneRunLogs(before time.Time) (int, error)
	// PruneInboxes removes the inbox files last changed before `before`.
	PruneInboxes(before time.Time) (int, error)
	// PruneLocalFiles removes the files delivered to local chats before
	// `before`.
	PruneLocalFiles(before time.Time) (int, error)
	// PruneTranscripts removes the Claude session transcripts last
	// written before `before`, but never those of the session live names
	// for a folder (the one it resumes next).
	PruneTranscripts(before time.Time, live func(folder string) (string, error)) (int, error)
}

// Sessions tells the session each group resumes next (store.SessionQuery);
// a Pruner that has it prunes session transcripts.
type Sessions interface {
	Get(ctx context.Context, folder store.Folder) (store.Session, error)
}

// SpoolGrace is how long a spooled copy whose message is no longer pending
// may stay before a pass removes it: longer than any commit takes, so a
// copy kept by a transaction not yet committed is never taken for a
// leftover.
const SpoolGrace = time.Hour

// OutboxRows looks up outbox rows (store.OutboxQuery); a Pruner that has it
// prunes Files.
type OutboxRows interface {
	Get(ctx context.Context, id store.OutboxID) (store.OutboxItem, error)
}

// Changes are the records of what each turn changed in its group's folder
// and memory (internal/snapshot, through the daemon's adapter).
type Changes interface {
	// Prune removes the changes that began before `before` (never a
	// group's newest) and the stored objects only they reached; it returns
	// how many of each went and blocks until done.
	Prune(ctx context.Context, before time.Time) (changes, objects int, err error)
}

// Pruner prunes old rows in the background.
type Pruner struct {
	DB    Store
	Files Files // nil: no spool to prune
	// Outbox tells whether a spooled file's message is still pending; nil:
	// Files are not pruned.
	Outbox OutboxRows
	// Sessions names each group's live session; nil: no session transcript
	// is pruned.
	Sessions Sessions
	Keep     time.Duration // the retention of rows; 0 keeps them all
	// Changes, when set, has its changes pruned after Keep.
	Changes Changes
	// Trees, when set, has its run logs pruned after LogKeep and its inbox
	// files after InboxKeep (0 keeps them).
	Trees     Trees
	LogKeep   time.Duration
	InboxKeep time.Duration
	Now       func() time.Time
	Log       zerolog.Logger
	// First is the delay before the first pass, Every the time between
	// passes, Batch the most rows of each kind per transaction, Hold the
	// time a batch aims to hold the writer at most, Pause the wait between
	// transactions. Zero values take the defaults.
	First, Every time.Duration
	Batch        int
	Hold         time.Duration
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
	if p.Hold == 0 {
		p.Hold = DefaultHold
	}
	if p.Pause == 0 {
		p.Pause = DefaultPause
	}
}

// batchSize is the rows of each kind a pass's next batch takes: FirstBatch
// (or max, when smaller) at first; half as many (at least 1) after a batch
// that held the writer longer than hold; twice as many (at most max) after
// one that held it less than half of hold, so the doubled batch, costing
// about twice as much, stays under hold. A batch costs what its rows cost
// (they are found through indexes), so the size settles where a batch
// holds the writer between hold/2 and hold, smaller while the cache is cold
// or the machine loaded.
type batchSize struct {
	n, max int
	hold   time.Duration
}

func newBatchSize(most int, hold time.Duration) batchSize {
	return batchSize{n: min(FirstBatch, most), max: most, hold: hold}
}

// after sizes the next batch by the time the last one held the writer.
func (b *batchSize) after(held time.Duration) {
	switch {
	case held > b.hold:
		b.n = max(1, b.n/2)
	case held < b.hold/2:
		b.n = min(b.max, b.n*2)
	}
}

// Run prunes until ctx ends, then returns nil. A failed pass is logged and
// tried again at the next one.
func (p *Pruner) Run(ctx context.Context) error {
	p.defaults()
	log := p.Log.With().Str("component", "retention").Logger()
	if p.Keep == 0 {
		log.Info().Msg("retention is 0: no rows are pruned")
		if p.Files == nil && (p.Trees == nil || p.LogKeep == 0 && p.InboxKeep == 0) {
			return nil
		}
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

// Pass prunes everything older than the retention, batch by batch, then
// the files (pruneFiles, pruneTrees), and returns how many rows went. It
// blocks until done or ctx ends.
func (p *Pruner) Pass(ctx context.Context) (store.Pruned, error) {
	p.defaults()
	var total store.Pruned
	now := p.Now()
	if p.Keep == 0 {
		return total, errors.Join(p.pruneFiles(ctx, now.Add(-SpoolGrace)), p.pruneTrees(ctx, now))
	}
	before := now.Add(-p.Keep)
	log := p.Log.With().Str("component", "retention").Logger()
	var batches int
	var longest time.Duration
	size := newBatchSize(p.Batch, p.Hold)
	started, said := time.Now(), time.Now()
	for {
		limit := size.n
		n, err := p.DB.Prune(ctx, before, limit)
		if err != nil {
			return total, err
		}
		longest = max(longest, n.Held)
		size.after(n.Held)
		batches++
		total = total.Add(n)
		if max(n.Messages, n.Outbox, n.TaskRuns, n.Usage) < limit {
			if batches > 1 {
				log.Info().Int("batches", batches).Int("rows", total.Total()).Dur("took", time.Since(started)).
					Dur("longest_batch", longest).Msg("pruned a backlog of old rows")
			}
			return total, errors.Join(p.pruneFiles(ctx, now.Add(-SpoolGrace)), p.pruneTrees(ctx, now), p.pruneChanges(ctx, before))
		}
		if c, ok := p.DB.(Checkpointer); ok {
			if _, err := c.Checkpoint(ctx); err != nil {
				return total, err
			}
		}
		// A large prune (the first after an upgrade, or a shorter
		// retention) says so, then how far it got every ProgressEvery.
		if batches == 1 {
			log.Info().Int("most_rows", p.Batch).Dur("hold", p.Hold).Dur("pause", p.Pause).Msg("pruning a backlog of old rows in batches")
		} else if time.Since(said) >= ProgressEvery {
			said = time.Now()
			log.Info().Int("batches", batches).Int("messages", total.Messages).Int("outbox", total.Outbox).
				Int("task_runs", total.TaskRuns).Int("usage", total.Usage).Int("batch", size.n).Dur("longest_batch", longest).Msg("pruning old rows: progress")
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

// pruneChanges removes the records of what turns changed that began
// before `before`, and the snapshots' objects only they reached.
func (p *Pruner) pruneChanges(ctx context.Context, before time.Time) error {
	if p.Changes == nil {
		return nil
	}
	changes, objects, err := p.Changes.Prune(ctx, before)
	if changes > 0 || objects > 0 {
		p.Log.Info().Str("component", "retention").Int("changes", changes).Int("objects", objects).Dur("retention", p.Keep).
			Msg("pruned old records of what turns changed")
	}
	return err
}

// pruneFiles removes the spooled copies kept before `before` whose message
// is no longer pending: the outbox sender removes a copy once its message
// is sent, so these are what a crash (or a failed removal) left.
func (p *Pruner) pruneFiles(ctx context.Context, before time.Time) error {
	rows := p.Outbox
	if p.Files == nil || rows == nil {
		return nil
	}
	n, err := p.Files.Prune(before, func(id int64) (bool, error) {
		it, err := rows.Get(ctx, store.OutboxID(id))
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return it.State != store.OutboxPending, nil
	})
	if n > 0 {
		p.Log.Info().Str("component", "retention").Int("files", n).Msg("removed copies of sent files left behind")
	}
	return err
}

// pruneTrees removes the run logs and inbox files older than their
// retentions, and the files of local chats and the session transcripts
// (the live session's aside) older than the retention.
func (p *Pruner) pruneTrees(ctx context.Context, now time.Time) error {
	if p.Trees == nil {
		return nil
	}
	var errs []error
	if p.LogKeep > 0 {
		n, err := p.Trees.PruneRunLogs(now.Add(-p.LogKeep))
		if n > 0 {
			p.Log.Info().Str("component", "retention").Int("run_logs", n).Dur("retention", p.LogKeep).Msg("pruned old run logs")
		}
		errs = append(errs, err)
	}
	if p.Keep > 0 {
		n, err := p.Trees.PruneLocalFiles(now.Add(-p.Keep))
		if n > 0 {
			p.Log.Info().Str("component", "retention").Int("local_files", n).Dur("retention", p.Keep).Msg("pruned old files of local chats")
		}
		errs = append(errs, err)
	}
	if s := p.Sessions; s != nil && p.Keep > 0 {
		n, err := p.Trees.PruneTranscripts(now.Add(-p.Keep), func(folder string) (string, error) {
			se, err := s.Get(ctx, store.Folder(folder))
			return se.SessionID, err
		})
		if n > 0 {
			p.Log.Info().Str("component", "retention").Int("transcripts", n).Dur("retention", p.Keep).Msg("pruned old session transcripts")
		}
		errs = append(errs, err)
	}
	if p.InboxKeep > 0 {
		n, err := p.Trees.PruneInboxes(now.Add(-p.InboxKeep))
		if n > 0 {
			p.Log.Info().Str("component", "retention").Int("inbox_files", n).Dur("retention", p.InboxKeep).Msg("pruned old inbox files")
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
