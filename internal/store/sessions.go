package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Session is a group's Claude session: the id to resume and the uuid of the
// last assistant message (the branch to resume at).
type Session struct {
	Folder    Folder
	SessionID string // empty: no session yet
	LastUUID  string
}

// Get returns folder's session; with none stored, a Session with an
// empty SessionID and no error.
func (q *SessionQuery) Get(ctx context.Context, folder Folder) (Session, error) {
	return getSession(ctx, q.db.read, folder)
}

// Get returns folder's session (see SessionQuery.Get).
func (q *SessionTx) Get(ctx context.Context, folder Folder) (Session, error) {
	return getSession(ctx, q.tx.stx, folder)
}

func getSession(ctx context.Context, q querier, folder Folder) (Session, error) {
	s := Session{Folder: folder}
	err := q.QueryRowContext(ctx, `SELECT session_id, last_uuid FROM sessions WHERE folder = ?`, folder).Scan(&s.SessionID, &s.LastUUID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("get session of %s: %w", folder, err)
	}
	return s, nil
}

// Set stores s for s.Folder. An empty SessionID clears it.
func (q *SessionTx) Set(ctx context.Context, s Session) error {
	if s.SessionID == "" {
		return q.Clear(ctx, s.Folder)
	}
	if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, last_uuid, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = excluded.session_id, last_uuid = excluded.last_uuid, updated_at = excluded.updated_at`,
		s.Folder, s.SessionID, s.LastUUID, toMS(q.tx.now())); err != nil {
		return fmt.Errorf("set session of %s: %w", s.Folder, err)
	}
	return nil
}

// Set stores a group's session (see SessionTx.Set).
func (q *SessionQuery) Set(ctx context.Context, s Session) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Sessions.Set(ctx, s) })
}

// Clear forgets folder's session, so its next run starts fresh.
func (q *SessionTx) Clear(ctx context.Context, folder Folder) error {
	if _, err := q.tx.stx.ExecContext(ctx, `DELETE FROM sessions WHERE folder = ?`, folder); err != nil {
		return fmt.Errorf("clear session of %s: %w", folder, err)
	}
	return nil
}

// Clear forgets a group's session (see SessionTx.Clear).
func (q *SessionQuery) Clear(ctx context.Context, folder Folder) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Sessions.Clear(ctx, folder) })
}

// Cursor returns the id of the last message handed to folder's agent, 0
// if none ever was.
func (q *SessionQuery) Cursor(ctx context.Context, folder Folder) (MessageID, error) {
	return getCursor(ctx, q.db.read, folder)
}

// Cursor returns folder's cursor (see SessionQuery.Cursor).
func (q *SessionTx) Cursor(ctx context.Context, folder Folder) (MessageID, error) {
	return getCursor(ctx, q.tx.stx, folder)
}

func getCursor(ctx context.Context, q querier, folder Folder) (MessageID, error) {
	var id MessageID
	err := q.QueryRowContext(ctx, `SELECT message_id FROM cursors WHERE folder = ?`, folder).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("get cursor of %s: %w", folder, err)
	}
	return id, nil
}

// Sessions.SetCursor sets folder's cursor to id. It may move backwards (a run that
// failed before replying hands its messages over again).
func (q *SessionTx) SetCursor(ctx context.Context, folder Folder, id MessageID) error {
	if id < 0 {
		return fmt.Errorf("set cursor of %s: %w: negative message id %d", folder, ErrInvalid, id)
	}
	if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO cursors (folder, message_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET message_id = excluded.message_id, updated_at = excluded.updated_at`,
		folder, id, toMS(q.tx.now())); err != nil {
		return fmt.Errorf("set cursor of %s: %w", folder, err)
	}
	return nil
}

// Sessions.SetCursor sets a group's cursor (see SessionTx.SetCursor).
func (q *SessionQuery) SetCursor(ctx context.Context, folder Folder, id MessageID) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Sessions.SetCursor(ctx, folder, id) })
}
