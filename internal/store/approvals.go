package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ApprovalState is where an approval request stands.
type ApprovalState string

// The approval states. Open is the only state a decision leaves.
const (
	ApprovalOpen    ApprovalState = "open"
	ApprovalAllowed ApprovalState = "allowed"
	ApprovalDenied  ApprovalState = "denied"
)

// Approval is a tool call a group's profile sent to the owner, and what
// became of it.
type Approval struct {
	ID        string // short, shown to the owner
	Folder    Folder
	RequestID string // the IPC request the runner wrote
	Tool      string
	Subject   string // the command, path or URL, as shown
	Rule      string // what --always would allow from now on
	State     ApprovalState
	OutboxID  OutboxID // the request's message in the main chat (0: none)
	AskedAt   time.Time
	DecidedAt time.Time // zero while open
	DecidedBy string
	Always    bool
}

// ApprovalRule is a standing permission added by an approval with always.
type ApprovalRule struct {
	ID        int64
	Folder    Folder
	Rule      string
	CreatedAt time.Time
	CreatedBy string
}

const approvalColumns = `id, folder, request_id, tool, subject, rule, state, outbox_id, asked_at, decided_at, decided_by, always`

func scanApproval(row rowScanner) (Approval, error) {
	var a Approval
	var asked, decided int64
	if err := row.Scan(&a.ID, &a.Folder, &a.RequestID, &a.Tool, &a.Subject, &a.Rule, &a.State, &a.OutboxID,
		&asked, &decided, &a.DecidedBy, &a.Always); err != nil {
		return Approval{}, err
	}
	a.AskedAt = fromMS(asked)
	if decided != 0 {
		a.DecidedAt = fromMS(decided)
	}
	return a, nil
}

// Add stores a new open approval request (AskedAt: now). ErrExists
// when its id, or its (folder, request id), is taken.
func (q *ApprovalTx) Add(ctx context.Context, a Approval) (Approval, error) {
	if a.ID == "" || a.Folder == "" || a.RequestID == "" || a.Tool == "" {
		return Approval{}, fmt.Errorf("add approval: %w: id, folder, request id and tool are required", ErrInvalid)
	}
	a.State, a.AskedAt, a.DecidedAt, a.DecidedBy, a.Always = ApprovalOpen, fromMS(toMS(q.tx.now())), time.Time{}, "", false
	res, err := q.tx.stx.ExecContext(ctx, `INSERT INTO approvals (id, folder, request_id, tool, subject, rule, state, outbox_id, asked_at)
		VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?) ON CONFLICT DO NOTHING`,
		a.ID, a.Folder, a.RequestID, a.Tool, a.Subject, a.Rule, a.OutboxID, toMS(a.AskedAt))
	if err != nil {
		return Approval{}, fmt.Errorf("add approval %s: %w", a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Approval{}, fmt.Errorf("add approval %s: %w", a.ID, err)
	} else if n == 0 {
		return Approval{}, fmt.Errorf("add approval %s: %w", a.ID, ErrExists)
	}
	return a, nil
}

// SetOutbox records the message that asks the owner.
func (q *ApprovalTx) SetOutbox(ctx context.Context, id string, outbox OutboxID) error {
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE approvals SET outbox_id = ? WHERE id = ?`, outbox, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("set approval %s message: %w", id, err)
	}
	return nil
}

// Decide settles the open request id as allowed or denied, by by.
// It reports false, and changes nothing, when the request is not open (it
// was settled before): a decision is taken once.
func (q *ApprovalTx) Decide(ctx context.Context, id string, allow, always bool, by string) (bool, error) {
	state := ApprovalDenied
	if allow {
		state = ApprovalAllowed
	}
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, always = ?
		WHERE id = ? AND state = 'open'`, state, toMS(q.tx.now()), by, boolInt(always && allow), id)
	if err != nil {
		return false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	return n == 1, nil
}

// Get returns the approval request id, or ErrNotFound.
func (q *ApprovalTx) Get(ctx context.Context, id string) (Approval, error) {
	return getApproval(ctx, q.tx.stx, `id = ?`, id)
}

// Get returns the approval request id, or ErrNotFound.
func (q *ApprovalQuery) Get(ctx context.Context, id string) (Approval, error) {
	return getApproval(ctx, q.db.read, `id = ?`, id)
}

// BySentID returns the approval request whose message in the main
// chat was sent with the network id sent, or ErrNotFound. Requests are
// bridged's own notices (origin notice, from no group): the indexes on
// those find the row.
func (q *ApprovalQuery) BySentID(ctx context.Context, sent string) (Approval, error) {
	if sent == "" {
		return Approval{}, fmt.Errorf("approval by sent id: %w", ErrNotFound)
	}
	return getApproval(ctx, q.db.read, `outbox_id != 0 AND outbox_id IN (
		SELECT id FROM outbox WHERE origin = 'notice' AND folder = '' AND sent_id = ?
		UNION ALL SELECT id FROM outbox WHERE origin = 'notice' AND folder = '' AND external_id = ?)`, sent, sent)
}

func getApproval(ctx context.Context, q querier, where string, args ...any) (Approval, error) {
	a, err := scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, fmt.Errorf("get approval: %w", ErrNotFound)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("get approval: %w", err)
	}
	return a, nil
}

// List returns up to limit approval requests, newest first (0:
// all); openOnly keeps the open ones.
func (q *ApprovalQuery) List(ctx context.Context, openOnly bool, limit int) ([]Approval, error) {
	query := `SELECT ` + approvalColumns + ` FROM approvals`
	if openOnly {
		query += ` WHERE state = 'open'`
	}
	query += ` ORDER BY asked_at DESC, id DESC`
	if limit > 0 {
		query += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rows, err := q.db.read.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	out, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return out, nil
}

// AddRule adds a standing rule for folder; adding one it has
// already is not an error.
func (q *ApprovalTx) AddRule(ctx context.Context, folder Folder, rule, by string) error {
	if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO approval_rules (folder, rule, created_at, created_by) VALUES (?, ?, ?, ?)
		ON CONFLICT (folder, rule) DO NOTHING`, folder, rule, toMS(q.tx.now()), by); err != nil {
		return fmt.Errorf("add approval rule for %s: %w", folder, err)
	}
	return nil
}

// CountOpen returns how many approval requests of folder are open.
func (q *ApprovalTx) CountOpen(ctx context.Context, folder Folder) (int, error) {
	var n int
	if err := q.tx.stx.QueryRowContext(ctx, `SELECT count(*) FROM approvals WHERE folder = ? AND state = 'open'`, folder).Scan(&n); err != nil {
		return 0, fmt.Errorf("count open approvals of %s: %w", folder, err)
	}
	return n, nil
}

// DropRules deletes every standing rule of folder and returns how
// many there were.
func (q *ApprovalTx) DropRules(ctx context.Context, folder Folder) (int64, error) {
	res, err := q.tx.stx.ExecContext(ctx, `DELETE FROM approval_rules WHERE folder = ?`, folder)
	if err != nil {
		return 0, fmt.Errorf("drop approval rules of %s: %w", folder, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("drop approval rules of %s: %w", folder, err)
	}
	return n, nil
}

// HasRule reports whether folder has the standing rule rule.
func (q *ApprovalQuery) HasRule(ctx context.Context, folder Folder, rule string) (bool, error) {
	var n int
	if err := q.db.read.QueryRowContext(ctx, `SELECT count(*) FROM approval_rules WHERE folder = ? AND rule = ?`, folder, rule).Scan(&n); err != nil {
		return false, fmt.Errorf("approval rule for %s: %w", folder, err)
	}
	return n > 0, nil
}

// Rules returns every standing rule, oldest first.
func (q *ApprovalQuery) Rules(ctx context.Context) ([]ApprovalRule, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT id, folder, rule, created_at, created_by FROM approval_rules ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list approval rules: %w", err)
	}
	out, err := collect(rows, func(row rowScanner) (ApprovalRule, error) {
		var r ApprovalRule
		var at int64
		if err := row.Scan(&r.ID, &r.Folder, &r.Rule, &at, &r.CreatedBy); err != nil {
			return ApprovalRule{}, err
		}
		r.CreatedAt = fromMS(at)
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list approval rules: %w", err)
	}
	return out, nil
}

// RemoveRule deletes the standing rule id (ErrNotFound if none).
func (q *ApprovalQuery) RemoveRule(ctx context.Context, id int64) error {
	return q.db.Tx(ctx, func(tx *Tx) error {
		res, err := tx.stx.ExecContext(ctx, `DELETE FROM approval_rules WHERE id = ?`, id)
		if err := oneRow(res, err); err != nil {
			return fmt.Errorf("remove approval rule %d: %w", id, err)
		}
		return nil
	})
}

// Take removes the pending notice name and reports whether it was
// pending: a notice owed once is taken once.
func (q *NoticeQuery) Take(ctx context.Context, name string) (bool, error) {
	var taken bool
	err := q.db.Tx(ctx, func(tx *Tx) error {
		res, err := tx.stx.ExecContext(ctx, `DELETE FROM pending_notices WHERE name = ?`, name)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		taken = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("take notice %s: %w", name, err)
	}
	return taken, nil
}

// BySentID returns the text of bridged's own notice (origin notice,
// from no group) that was sent with the network id sent, or ErrNotFound.
func (q *NoticeQuery) BySentID(ctx context.Context, sent string) (string, error) {
	var text string
	err := q.db.read.QueryRowContext(ctx, `SELECT text FROM outbox WHERE sent_id = ? AND origin = 'notice' AND folder = ''
		ORDER BY id DESC LIMIT 1`, sent).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("notice by sent id: %w", ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("notice by sent id: %w", err)
	}
	return text, nil
}
