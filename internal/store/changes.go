package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ChangeKind is what made a recorded change: an agent's turn for messages,
// a task's turn, or the owner's undo.
type ChangeKind string

// Kinds of change.
const (
	ChangeTurn ChangeKind = "turn"
	ChangeTask ChangeKind = "task"
	ChangeUndo ChangeKind = "undo"
	// ChangeOutside: what changed between two turns (the owner's edits,
	// a process the agent left running), found when the next one began.
	ChangeOutside ChangeKind = "outside"
	// ChangeHeld: the memory change of a turn whose input came from
	// someone other than the owner, in an `ask` group, put back at once
	// until the owner applies it (an undo of the held change).
	ChangeHeld ChangeKind = "held"
)

// ChangeID numbers recorded changes ("turn 42"), in the order they began.
type ChangeID int64

// Change is what one turn (or undo) changed in its group's folder and
// memory: the roots of its snapshots before and after (hashes of tree
// objects kept by internal/snapshot; the after roots are empty while it
// runs) and a summary.
type Change struct {
	ID     ChangeID
	Folder Folder
	Chat   ChatID
	Kind   ChangeKind
	// Upto is the newest message the turn had been handed when it began.
	Upto   MessageID
	Task   TaskID
	Undoes ChangeID // an undo: the change it took back
	// Plan is an undo's list of writes (an object's hash), so one cut
	// off is finished at the next start.
	Plan string
	// Source names where the turn's input came from other than the owner:
	// who else wrote its messages ("Bob (+49170…)"), a received file, the
	// web pages it fetched; empty: the owner alone.
	Source                    string
	StartedAt, EndedAt        time.Time // EndedAt zero: still open
	BeforeFiles, BeforeMemory string
	AfterFiles, AfterMemory   string
	Summary
	Note string // what the snapshots could not record, for a person
}

// Summary counts a change: files (outside memory) added, removed and
// modified, and lines of memory added and removed.
type Summary struct {
	FilesAdded, FilesRemoved, FilesModified int
	MemoryAdded, MemoryRemoved              int
}

// Empty reports whether nothing changed.
func (s Summary) Empty() bool { return s == Summary{} }

// Open reports whether the change has not ended yet.
func (c Change) Open() bool { return c.EndedAt.IsZero() }

const changeColumns = `id, folder, chat, kind, upto, task, undoes, plan, source, started_at, ended_at, before_files, before_memory,
	after_files, after_memory, files_added, files_removed, files_modified, memory_added, memory_removed, note`

func scanChange(row interface{ Scan(...any) error }) (Change, error) {
	var c Change
	var started, ended int64
	err := row.Scan(&c.ID, &c.Folder, &c.Chat, &c.Kind, &c.Upto, &c.Task, &c.Undoes, &c.Plan, &c.Source, &started, &ended,
		&c.BeforeFiles, &c.BeforeMemory, &c.AfterFiles, &c.AfterMemory,
		&c.FilesAdded, &c.FilesRemoved, &c.FilesModified, &c.MemoryAdded, &c.MemoryRemoved, &c.Note)
	if err != nil {
		return Change{}, err
	}
	c.StartedAt = fromMS(started)
	if ended > 0 {
		c.EndedAt = fromMS(ended)
	}
	return c, nil
}

// Add records c whole (begun and ended) and returns its id.
func (q *ChangeQuery) Add(ctx context.Context, c Change) (ChangeID, error) {
	id, err := q.Begin(ctx, c)
	if err != nil {
		return 0, err
	}
	return id, q.End(ctx, id, c.AfterFiles, c.AfterMemory, c.Summary, c.Note, "", c.EndedAt)
}

// Begin records the start of c (its before roots) and returns its id.
func (q *ChangeQuery) Begin(ctx context.Context, c Change) (ChangeID, error) {
	if c.StartedAt.IsZero() {
		c.StartedAt = q.db.now()
	}
	var id ChangeID
	err := q.db.Tx(ctx, func(tx *Tx) error {
		res, err := tx.stx.ExecContext(ctx, `INSERT INTO turn_changes (folder, chat, kind, upto, task, undoes, plan, source, started_at,
			before_files, before_memory, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.Folder, c.Chat, c.Kind, c.Upto, c.Task, c.Undoes, c.Plan, c.Source, toMS(c.StartedAt), c.BeforeFiles, c.BeforeMemory, c.Note)
		if err != nil {
			return err
		}
		n, err := res.LastInsertId()
		id = ChangeID(n)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("begin change of %s: %w", c.Folder, err)
	}
	return id, nil
}

// End records the end of change id: its after roots, summary and note,
// and its source when source is not empty (what its input came from,
// known only at its end). A change that ended already is left as it is
// (ErrNotFound).
func (q *ChangeQuery) End(ctx context.Context, id ChangeID, afterFiles, afterMemory string, s Summary, note, source string, at time.Time) error {
	if at.IsZero() {
		at = q.db.now()
	}
	return q.db.Tx(ctx, func(tx *Tx) error {
		res, err := tx.stx.ExecContext(ctx, `UPDATE turn_changes SET ended_at = ?, after_files = ?, after_memory = ?,
			files_added = ?, files_removed = ?, files_modified = ?, memory_added = ?, memory_removed = ?, note = ?,
			source = CASE WHEN ? != '' THEN ? ELSE source END
			WHERE id = ? AND ended_at = 0`,
			max(toMS(at), 1), afterFiles, afterMemory, s.FilesAdded, s.FilesRemoved, s.FilesModified, s.MemoryAdded, s.MemoryRemoved, note, source, source, id)
		if err != nil {
			return fmt.Errorf("end change %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("end change %d: %w", id, ErrNotFound)
		}
		return nil
	})
}

// Get returns change id, or ErrNotFound.
func (q *ChangeQuery) Get(ctx context.Context, id ChangeID) (Change, error) {
	c, err := scanChange(q.db.read.QueryRowContext(ctx, `SELECT `+changeColumns+` FROM turn_changes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Change{}, fmt.Errorf("change %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Change{}, fmt.Errorf("change %d: %w", id, err)
	}
	return c, nil
}

// List returns folder's changes that began at or after since, newest
// first, at most limit; with changed, only those that changed something
// (and those still open).
func (q *ChangeQuery) List(ctx context.Context, folder Folder, since time.Time, changed bool, limit int) ([]Change, error) {
	where := ``
	if changed {
		where = ` AND (ended_at = 0 OR files_added + files_removed + files_modified + memory_added + memory_removed > 0 OR note != '')`
	}
	return q.list(ctx, `SELECT `+changeColumns+` FROM turn_changes WHERE folder = ? AND started_at >= ?`+where+` ORDER BY id DESC LIMIT ?`,
		folder, toMS(since), limit)
}

// ForMessage returns the first turn of folder that had been handed message
// id when it began, or ErrNotFound.
func (q *ChangeQuery) ForMessage(ctx context.Context, folder Folder, id MessageID) (Change, error) {
	c, err := scanChange(q.db.read.QueryRowContext(ctx, `SELECT `+changeColumns+` FROM turn_changes
		WHERE folder = ? AND upto >= ? AND kind = 'turn' ORDER BY upto, id LIMIT 1`, folder, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Change{}, fmt.Errorf("change for message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Change{}, fmt.Errorf("change for message %d: %w", id, err)
	}
	return c, nil
}

// Opened returns the changes that began and never ended (a crash cut them
// off), oldest first.
func (q *ChangeQuery) Opened(ctx context.Context) ([]Change, error) {
	return q.list(ctx, `SELECT `+changeColumns+` FROM turn_changes WHERE ended_at = 0 ORDER BY id LIMIT 1000`)
}

// After returns folder's changes after id, oldest first, at most limit:
// the later turns an undo must not overwrite silently.
func (q *ChangeQuery) After(ctx context.Context, folder Folder, id ChangeID, limit int) ([]Change, error) {
	return q.list(ctx, `SELECT `+changeColumns+` FROM turn_changes WHERE folder = ? AND id > ? ORDER BY id LIMIT ?`, folder, id, limit)
}

// Roots returns the changes after id, oldest first, at most limit: what
// the snapshot store's collection reads to find the objects still in use.
func (q *ChangeQuery) Roots(ctx context.Context, after ChangeID, limit int) ([]Change, error) {
	return q.list(ctx, `SELECT `+changeColumns+` FROM turn_changes WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
}

// Prune removes at most limit ended changes that began before `before`,
// but never a group's newest change, and returns how many went.
func (q *ChangeQuery) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := q.db.Tx(ctx, func(tx *Tx) error {
		res, err := tx.stx.ExecContext(ctx, `DELETE FROM turn_changes WHERE id IN (
			SELECT id FROM turn_changes c WHERE started_at < ? AND ended_at != 0
			AND id < (SELECT MAX(id) FROM turn_changes d WHERE d.folder = c.folder) ORDER BY started_at LIMIT ?)`, toMS(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune changes: %w", err)
	}
	return int(n), nil
}

func (q *ChangeQuery) list(ctx context.Context, query string, args ...any) ([]Change, error) {
	rows, err := q.db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("changes: %w", err)
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		c, err := scanChange(rows)
		if err != nil {
			return nil, fmt.Errorf("changes: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PostSummary records that the memory summary of the week ending at
// weekEnd was posted and commits it to the outbox (nothing when its text
// is empty), in one transaction: false, and nothing committed, when that
// week's was posted already.
func (q *ChangeQuery) PostSummary(ctx context.Context, weekEnd time.Time, it OutboxItem) (bool, error) {
	return txValue(ctx, q.db, func(tx *Tx) (bool, error) {
		res, err := tx.stx.ExecContext(ctx, `INSERT INTO memory_summaries (week_end, posted_at) VALUES (?, ?) ON CONFLICT DO NOTHING`,
			toMS(weekEnd), toMS(tx.now()))
		if err != nil {
			return false, fmt.Errorf("record memory summary: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return false, nil
		}
		if it.Text == "" {
			return true, nil
		}
		_, err = tx.Outbox.Enqueue(ctx, it)
		return err == nil, err
	})
}

// Summarized returns the end of the newest week whose memory summary was
// posted (zero: none).
func (q *ChangeQuery) Summarized(ctx context.Context) (time.Time, error) {
	var ms sql.NullInt64
	if err := q.db.read.QueryRowContext(ctx, `SELECT MAX(week_end) FROM memory_summaries`).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("memory summaries: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, nil
	}
	return fromMS(ms.Int64), nil
}
