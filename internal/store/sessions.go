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

// GetSession returns folder's session; with none stored, a Session with an
// empty SessionID and no error.
func (db *DB) GetSession(ctx context.Context, folder Folder) (Session, error) {
	return getSession(ctx, db.read, folder)
}

// GetSession returns folder's session (see DB.GetSession).
func (tx *Tx) GetSession(ctx context.Context, folder Folder) (Session, error) {
	return getSession(ctx, tx.tx, folder)
}

func getSession(ctx context.Context, q querier, folder Folder) (Session, error) {
	s := Session{Folder: folder}
	err := q.QueryRowContext(ctx, `SELECT session_id, last_uuid FROM sessions WHERE folder = ?`, folder).Scan(&s.SessionID, &s.LastUUID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("get session of %s: %w", folder, err)
	}
	return s, nil
}

// SetSession stores s for s.Folder. An empty SessionID clears it.
func (tx *Tx) SetSession(ctx context.Context, s Session) error {
	if s.SessionID == "" {
		return tx.ClearSession(ctx, s.Folder)
	}
	if _, err := tx.tx.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, last_uuid, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = excluded.session_id, last_uuid = excluded.last_uuid, updated_at = excluded.updated_at`,
		s.Folder, s.SessionID, s.LastUUID, toMS(tx.now())); err != nil {
		return fmt.Errorf("set session of %s: %w", s.Folder, err)
	}
	return nil
}

// SetSession stores a group's session (see Tx.SetSession).
func (db *DB) SetSession(ctx context.Context, s Session) error {
	return db.Tx(ctx, func(tx *Tx) error { return tx.SetSession(ctx, s) })
}

// ClearSession forgets folder's session, so its next run starts fresh.
func (tx *Tx) ClearSession(ctx context.Context, folder Folder) error {
	if _, err := tx.tx.ExecContext(ctx, `DELETE FROM sessions WHERE folder = ?`, folder); err != nil {
		return fmt.Errorf("clear session of %s: %w", folder, err)
	}
	return nil
}

// ClearSession forgets a group's session (see Tx.ClearSession).
func (db *DB) ClearSession(ctx context.Context, folder Folder) error {
	return db.Tx(ctx, func(tx *Tx) error { return tx.ClearSession(ctx, folder) })
}

// GetCursor returns the id of the last message handed to folder's agent, 0
// if none ever was.
func (db *DB) GetCursor(ctx context.Context, folder Folder) (MessageID, error) {
	return getCursor(ctx, db.read, folder)
}

// GetCursor returns folder's cursor (see DB.GetCursor).
func (tx *Tx) GetCursor(ctx context.Context, folder Folder) (MessageID, error) {
	return getCursor(ctx, tx.tx, folder)
}

func getCursor(ctx context.Context, q querier, folder Folder) (MessageID, error) {
	var id MessageID
	err := q.QueryRowContext(ctx, `SELECT message_id FROM cursors WHERE folder = ?`, folder).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("get cursor of %s: %w", folder, err)
	}
	return id, nil
}

// SetCursor sets folder's cursor to id. It may move backwards (a run that
// failed before replying hands its messages over again).
func (tx *Tx) SetCursor(ctx context.Context, folder Folder, id MessageID) error {
	if id < 0 {
		return fmt.Errorf("set cursor of %s: %w: negative message id %d", folder, ErrInvalid, id)
	}
	if _, err := tx.tx.ExecContext(ctx, `INSERT INTO cursors (folder, message_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET message_id = excluded.message_id, updated_at = excluded.updated_at`,
		folder, id, toMS(tx.now())); err != nil {
		return fmt.Errorf("set cursor of %s: %w", folder, err)
	}
	return nil
}

// SetCursor sets a group's cursor (see Tx.SetCursor).
func (db *DB) SetCursor(ctx context.Context, folder Folder, id MessageID) error {
	return db.Tx(ctx, func(tx *Tx) error { return tx.SetCursor(ctx, folder, id) })
}
