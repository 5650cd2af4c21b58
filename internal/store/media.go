package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// MediaState is where an inbound message's media is in its life.
type MediaState string

// Media states.
const (
	// MediaPending: not fetched yet; the message and every later one of its
	// chat wait.
	MediaPending MediaState = "pending"
	// MediaSaved: the file is in the group's inbox/.
	MediaSaved MediaState = "saved"
	// MediaFailed: it could not be fetched or was refused (too large); the
	// placeholder says why.
	MediaFailed MediaState = "failed"
)

// Media is the attachment of an inbound message, fetched after the message
// was stored (see the media table in migrations/0006_media.sql).
type Media struct {
	MessageID MessageID
	Chat      ChatID
	Source    string // the fetcher: "whatsapp", "upload"
	Ref       []byte // what the fetcher needs (JSON)
	Label     string // placeholder label
	Name      string // file name in inbox/
	MIME      string
	Size      int64 // announced bytes, 0 unknown
	Voice     bool  // transcribe it
	Seconds   int   // announced duration, 0 unknown
	// Head and Tail are the message's text around the placeholder.
	Head, Tail string
	State      MediaState
	Detail     string // the final placeholder, once settled
	Attempts   int    // fetches started
	CreatedAt  time.Time
}

// Insert stores m as pending for the message m.MessageID, which tx
// inserted. Storing it again for the same message is a no-op.
func (q *MediaTx) Insert(ctx context.Context, m Media) error {
	if m.MessageID == 0 || m.Chat == "" || m.Source == "" || m.Label == "" || m.Name == "" {
		return fmt.Errorf("insert media: %w: message %d in %q from %q, label %q, name %q",
			ErrInvalid, m.MessageID, m.Chat, m.Source, m.Label, m.Name)
	}
	if m.Ref == nil {
		m.Ref = []byte("{}")
	}
	_, err := q.tx.stx.ExecContext(ctx, `INSERT INTO media (message_id, chat, source, ref, label, name, mime, size, voice, seconds, head, tail, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (message_id) DO NOTHING`,
		m.MessageID, m.Chat, m.Source, string(m.Ref), m.Label, m.Name, m.MIME, m.Size, boolInt(m.Voice), m.Seconds,
		m.Head, m.Tail, toMS(q.tx.now()))
	if err != nil {
		return fmt.Errorf("insert media of message %d: %w", m.MessageID, err)
	}
	return nil
}

const mediaColumns = `message_id, chat, source, ref, label, name, mime, size, voice, seconds, head, tail, state, detail, attempts, created_at`

func scanMedia(row rowScanner) (Media, error) {
	var m Media
	var ref string
	var created int64
	err := row.Scan(&m.MessageID, &m.Chat, &m.Source, &ref, &m.Label, &m.Name, &m.MIME, &m.Size, &m.Voice, &m.Seconds,
		&m.Head, &m.Tail, &m.State, &m.Detail, &m.Attempts, &created)
	m.Ref = []byte(ref)
	m.CreatedAt = fromMS(created)
	return m, err
}

// Pending returns every media not settled yet, oldest first: what the
// media worker resumes at start.
func (q *MediaQuery) Pending(ctx context.Context) ([]Media, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+mediaColumns+` FROM media WHERE state = 'pending' ORDER BY message_id`)
	if err != nil {
		return nil, fmt.Errorf("pending media: %w", err)
	}
	ms, err := collect(rows, scanMedia)
	if err != nil {
		return nil, fmt.Errorf("pending media: %w", err)
	}
	return ms, nil
}

// Get returns the media of message id, or an error wrapping
// ErrNotFound.
func (q *MediaQuery) Get(ctx context.Context, id MessageID) (Media, error) {
	m, err := scanMedia(q.db.read.QueryRowContext(ctx, `SELECT `+mediaColumns+` FROM media WHERE message_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Media{}, fmt.Errorf("get media of message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Media{}, fmt.Errorf("get media of message %d: %w", id, err)
	}
	return m, nil
}

// Start counts one more fetch of message id's media and returns the
// count, so a file that takes the daemon down every time is given up on
// after a few starts instead of forever.
func (q *MediaQuery) Start(ctx context.Context, id MessageID) (int, error) {
	return txValue(ctx, q.db, func(tx *Tx) (int, error) {
		var n int
		err := tx.stx.QueryRowContext(ctx, `UPDATE media SET attempts = attempts + 1 WHERE message_id = ? AND state = 'pending' RETURNING attempts`, id).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("start media of message %d: %w (or already settled)", id, ErrNotFound)
		}
		if err != nil {
			return 0, fmt.Errorf("start media of message %d: %w", id, err)
		}
		return n, nil
	})
}

// Settle records how message id's media ended (MediaSaved or
// MediaFailed) and, in the same transaction, makes the message's text its
// head, placeholder and tail. It returns false when the media was settled
// already (or is unknown): nothing changes then.
func (q *MediaQuery) Settle(ctx context.Context, id MessageID, state MediaState, placeholder string) (bool, error) {
	if state != MediaSaved && state != MediaFailed {
		return false, fmt.Errorf("settle media of message %d: %w: state %q", id, ErrInvalid, state)
	}
	return txValue(ctx, q.db, func(tx *Tx) (bool, error) {
		res, err := tx.stx.ExecContext(ctx, `UPDATE media SET state = ?, detail = ?, settled_at = ? WHERE message_id = ? AND state = 'pending'`,
			state, placeholder, toMS(tx.now()), id)
		if err != nil {
			return false, fmt.Errorf("settle media of message %d: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
		if _, err := tx.stx.ExecContext(ctx, `UPDATE messages SET text = (SELECT head || ? || tail FROM media WHERE message_id = ?) WHERE id = ?`,
			placeholder, id, id); err != nil {
			return false, fmt.Errorf("settle media of message %d: %w", id, err)
		}
		return true, nil
	})
}
