package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// OutboxItem is one message bridged will send, is sending, or sent.
type OutboxItem struct {
	ID         OutboxID
	Chat       ChatID
	Group      Folder // the group it came from; empty for the daemon's own
	Text       string
	Origin     Origin
	State      OutboxState
	ExternalID string // channel message id chosen at enqueue, reused on retries
	SentID     string // the id the channel reported on success
	Attempts   int
	LastError  string
	CreatedAt  time.Time
	SentAt     *time.Time
	FailedAt   *time.Time
	// FileName and FileSize describe the file the message carries (empty
	// and 0 for none): kept on the row after its copy is removed.
	FileName string
	FileSize int64
}

const outboxColumns = `id, chat, folder, text, origin, state, external_id, sent_id, attempts, last_error, created_at, sent_at, failed_at, file_name, file_size`

func scanOutbox(row rowScanner) (OutboxItem, error) {
	var it OutboxItem
	var created int64
	var sent, failed sql.NullInt64
	err := row.Scan(&it.ID, &it.Chat, &it.Group, &it.Text, &it.Origin, &it.State, &it.ExternalID, &it.SentID,
		&it.Attempts, &it.LastError, &created, &sent, &failed, &it.FileName, &it.FileSize)
	it.CreatedAt = fromMS(created)
	it.SentAt = fromNullMS(sent)
	it.FailedAt = fromNullMS(failed)
	return it, err
}

// NewExternalID returns a fresh channel message id in WhatsApp's style:
// "3EB0" and 16 upper-case hex digits.
func NewExternalID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "3EB0" + strings.ToUpper(hex.EncodeToString(b[:]))
}

// Enqueue commits a message to send and returns the stored row
// (pending, with its id and ExternalID). The text must not be blank and the
// origin must be one of the Origin constants (ErrInvalid). ExternalID is
// chosen here when it is empty.
func (q *OutboxTx) Enqueue(ctx context.Context, it OutboxItem) (OutboxItem, error) {
	switch {
	case it.Chat == "":
		return OutboxItem{}, fmt.Errorf("enqueue outbox: %w: empty chat id", ErrInvalid)
	case strings.TrimSpace(it.Text) == "":
		return OutboxItem{}, fmt.Errorf("enqueue outbox for %s: %w: empty text", it.Chat, ErrInvalid)
	case !it.Origin.valid():
		return OutboxItem{}, fmt.Errorf("enqueue outbox for %s: %w: unknown origin %q", it.Chat, ErrInvalid, it.Origin)
	}
	if it.ExternalID == "" {
		it.ExternalID = NewExternalID()
	}
	it.State = OutboxPending
	it.SentID, it.Attempts, it.LastError, it.SentAt, it.FailedAt = "", 0, "", nil, nil
	it.CreatedAt = fromMS(toMS(q.tx.now()))
	if it.FileName == "" {
		it.FileSize = 0
	}
	if it.FileSize < 0 {
		return OutboxItem{}, fmt.Errorf("enqueue outbox for %s: %w: negative file size", it.Chat, ErrInvalid)
	}
	res, err := q.tx.stx.ExecContext(ctx, `INSERT INTO outbox (chat, folder, text, origin, state, external_id, created_at, file_name, file_size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		it.Chat, it.Group, it.Text, it.Origin, it.State, it.ExternalID, toMS(it.CreatedAt), it.FileName, it.FileSize)
	if err != nil {
		return OutboxItem{}, fmt.Errorf("enqueue outbox for %s: %w", it.Chat, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return OutboxItem{}, fmt.Errorf("enqueue outbox for %s: %w", it.Chat, err)
	}
	it.ID = OutboxID(id)
	return it, nil
}

// Enqueue commits a message to send (see OutboxTx.Enqueue).
func (q *OutboxQuery) Enqueue(ctx context.Context, it OutboxItem) (OutboxItem, error) {
	return txValue(ctx, q.db, func(tx *Tx) (OutboxItem, error) { return tx.Outbox.Enqueue(ctx, it) })
}

// Get returns the outbox row id, or ErrNotFound.
func (q *OutboxQuery) Get(ctx context.Context, id OutboxID) (OutboxItem, error) {
	return getOutbox(ctx, q.db.read, id)
}

func getOutbox(ctx context.Context, q querier, id OutboxID) (OutboxItem, error) {
	it, err := scanOutbox(q.QueryRowContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return OutboxItem{}, fmt.Errorf("get outbox %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return OutboxItem{}, fmt.Errorf("get outbox %d: %w", id, err)
	}
	return it, nil
}

// Pending returns up to limit rows still to send, oldest first. A
// limit of 0 or less means no limit.
func (q *OutboxQuery) Pending(ctx context.Context, limit int) ([]OutboxItem, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE state = 'pending' ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("pending outbox: %w", err)
	}
	out, err := collect(rows, scanOutbox)
	if err != nil {
		return nil, fmt.Errorf("pending outbox: %w", err)
	}
	return out, nil
}

// Outbox.MarkSent records that row id went out at at, under the channel's sentID
// (ExternalID when empty). When the chat is a registered group the text is
// also stored as a message (FromMe, IsBot), so the chat's history holds both
// directions. Marking a row sent twice changes nothing. ErrNotFound if the
// row does not exist.
func (q *OutboxTx) MarkSent(ctx context.Context, id OutboxID, sentID string, at time.Time) error {
	it, err := getOutbox(ctx, q.tx.stx, id)
	if err != nil {
		return fmt.Errorf("mark sent: %w", err)
	}
	if it.State == OutboxSent {
		return nil
	}
	if sentID == "" {
		sentID = it.ExternalID
	}
	if at.IsZero() {
		at = q.tx.now()
	}
	if _, err := q.tx.stx.ExecContext(ctx, `UPDATE outbox SET state = 'sent', sent_id = ?, sent_at = ?, failed_at = NULL WHERE id = ?`,
		sentID, toMS(at), id); err != nil {
		return fmt.Errorf("mark outbox %d sent: %w", id, err)
	}
	if _, _, err := q.tx.Messages.Insert(ctx, Message{
		Chat: it.Chat, ExternalID: sentID, Text: it.Text, SentAt: at, FromMe: true, IsBot: true,
	}); err != nil {
		return fmt.Errorf("mark outbox %d sent: %w", id, err)
	}
	return nil
}

// Outbox.MarkSent records a successful send (see OutboxTx.MarkSent).
func (q *OutboxQuery) MarkSent(ctx context.Context, id OutboxID, sentID string, at time.Time) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Outbox.MarkSent(ctx, id, sentID, at) })
}

// Outbox.MarkAttempt records a failed attempt that will be retried: attempts+1 and
// the error. The row stays pending with the same ExternalID.
func (q *OutboxTx) MarkAttempt(ctx context.Context, id OutboxID, errText string) error {
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?`, errText, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("mark outbox %d attempt: %w", id, err)
	}
	return nil
}

// Outbox.MarkAttempt records a failed attempt (see OutboxTx.MarkAttempt).
func (q *OutboxQuery) MarkAttempt(ctx context.Context, id OutboxID, errText string) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Outbox.MarkAttempt(ctx, id, errText) })
}

// Outbox.MarkFailed records that row id will not be sent: the attempt that failed
// for good counts (attempts+1), the error is kept and the row becomes
// failed. A row already sent stays sent.
func (q *OutboxTx) MarkFailed(ctx context.Context, id OutboxID, errText string) error {
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE outbox SET state = CASE WHEN state = 'sent' THEN 'sent' ELSE 'failed' END,
		attempts = attempts + (state != 'sent'),
		last_error = CASE WHEN state = 'sent' THEN last_error ELSE ? END,
		failed_at = CASE WHEN state = 'sent' THEN failed_at ELSE ? END
		WHERE id = ?`, errText, toMS(q.tx.now()), id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("mark outbox %d failed: %w", id, err)
	}
	return nil
}

// Outbox.MarkFailed records a send that failed for good (see OutboxTx.MarkFailed).
func (q *OutboxQuery) MarkFailed(ctx context.Context, id OutboxID, errText string) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Outbox.MarkFailed(ctx, id, errText) })
}

// SetFile records on row id the name and size of the file it carries.
func (q *OutboxTx) SetFile(ctx context.Context, id OutboxID, name string, size int64) error {
	if name == "" || size < 0 {
		return fmt.Errorf("set outbox %d file: %w: want a name and a size of 0 or more", id, ErrInvalid)
	}
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE outbox SET file_name = ?, file_size = ? WHERE id = ?`, name, size, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("set outbox %d file: %w", id, err)
	}
	return nil
}

// Files returns how many files the group with folder committed to the
// outbox since since, and their bytes.
func (q *OutboxQuery) Files(ctx context.Context, folder Folder, since time.Time) (files int, bytes int64, err error) {
	return outboxFiles(ctx, q.db.read, folder, since)
}

// Files is OutboxQuery.Files inside the transaction.
func (q *OutboxTx) Files(ctx context.Context, folder Folder, since time.Time) (files int, bytes int64, err error) {
	return outboxFiles(ctx, q.tx.stx, folder, since)
}

func outboxFiles(ctx context.Context, q querier, folder Folder, since time.Time) (int, int64, error) {
	var files int
	var bytes int64
	err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(file_size), 0) FROM outbox
		WHERE folder = ? AND file_name != '' AND created_at >= ?`, folder, toMS(since)).Scan(&files, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("outbox files of %s: %w", folder, err)
	}
	return files, bytes, nil
}

// Outbox.RecentFailures returns up to limit rows that failed at or after since,
// newest first. A limit of 0 or less means no limit.
func (q *OutboxQuery) RecentFailures(ctx context.Context, since time.Time, limit int) ([]OutboxItem, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+outboxColumns+` FROM outbox
		WHERE state = 'failed' AND failed_at >= ? ORDER BY failed_at DESC, id DESC LIMIT ?`, toMS(since), limit)
	if err != nil {
		return nil, fmt.Errorf("recent outbox failures: %w", err)
	}
	out, err := collect(rows, scanOutbox)
	if err != nil {
		return nil, fmt.Errorf("recent outbox failures: %w", err)
	}
	return out, nil
}

// IsOwn reports whether externalID in chat is a message bridged sent
// (an id the outbox chose, or the id a channel reported for it).
func (q *OutboxQuery) IsOwn(ctx context.Context, chat ChatID, externalID string) (bool, error) {
	own, err := isOwnMessage(ctx, q.db.read, chat, externalID)
	if err != nil {
		return false, fmt.Errorf("check own message %s in %s: %w", externalID, chat, err)
	}
	return own, nil
}

func isOwnMessage(ctx context.Context, q querier, chat ChatID, externalID string) (bool, error) {
	if externalID == "" {
		return false, nil
	}
	// Both halves are one index lookup: sent_id != '' lets SQLite use the
	// partial index outbox_chat_sent (without it, the second half reads
	// every reply the chat ever had).
	var own bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE chat = ? AND external_id = ?)
		OR EXISTS (SELECT 1 FROM outbox WHERE chat = ? AND sent_id = ? AND sent_id != '')`, chat, externalID, chat, externalID).Scan(&own)
	return own, err
}
