package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Requests.Get is an agent's IPC request that was carried out, with the
// response it got. It is recorded in the transaction that made the request's
// effect, so a request seen again is answered from the record, never carried
// out twice.
type HandledRequest struct {
	Folder    Folder // the group whose directory it came from
	ID        string // the request id the agent chose
	Type      string // the tool's name
	Response  []byte // the response JSON, as written
	HandledAt time.Time
}

// Record records r as handled (HandledAt: now). Call it inside the
// transaction that makes the request's effect. ErrExists if (folder, id) is
// recorded already: the effect must then be rolled back.
func (q *RequestTx) Record(ctx context.Context, r HandledRequest) error {
	switch {
	case r.Folder == "" || r.ID == "" || r.Type == "":
		return fmt.Errorf("record request: %w: folder, id and type are required", ErrInvalid)
	case len(r.Response) == 0:
		return fmt.Errorf("record request %s/%s: %w: no response", r.Folder, r.ID, ErrInvalid)
	}
	res, err := q.tx.stx.ExecContext(ctx, `INSERT INTO handled_requests (folder, request_id, type, response, handled_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (folder, request_id) DO NOTHING`,
		r.Folder, r.ID, r.Type, string(r.Response), toMS(q.tx.now()))
	if err != nil {
		return fmt.Errorf("record request %s/%s: %w", r.Folder, r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record request %s/%s: %w", r.Folder, r.ID, err)
	} else if n == 0 {
		return fmt.Errorf("record request %s/%s: %w", r.Folder, r.ID, ErrExists)
	}
	return nil
}

// Forget deletes the record of folder's request id, when the effect
// recorded with it is undone. Forgetting a request never recorded is not an
// error.
func (q *RequestTx) Forget(ctx context.Context, folder Folder, id string) error {
	if _, err := q.tx.stx.ExecContext(ctx, `DELETE FROM handled_requests WHERE folder = ? AND request_id = ?`, folder, id); err != nil {
		return fmt.Errorf("forget request %s/%s: %w", folder, id, err)
	}
	return nil
}

// Get returns the record of folder's request id, or ErrNotFound.
func (q *RequestQuery) Get(ctx context.Context, folder Folder, id string) (HandledRequest, error) {
	return handledRequest(ctx, q.db.read, folder, id)
}

// Get returns the record of folder's request id, or ErrNotFound.
func (q *RequestTx) Get(ctx context.Context, folder Folder, id string) (HandledRequest, error) {
	return handledRequest(ctx, q.tx.stx, folder, id)
}

func handledRequest(ctx context.Context, q querier, folder Folder, id string) (HandledRequest, error) {
	var r HandledRequest
	var resp string
	var at int64
	err := q.QueryRowContext(ctx, `SELECT folder, request_id, type, response, handled_at FROM handled_requests
		WHERE folder = ? AND request_id = ?`, folder, id).Scan(&r.Folder, &r.ID, &r.Type, &resp, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return HandledRequest{}, fmt.Errorf("handled request %s/%s: %w", folder, id, ErrNotFound)
	}
	if err != nil {
		return HandledRequest{}, fmt.Errorf("handled request %s/%s: %w", folder, id, err)
	}
	r.Response = []byte(resp)
	r.HandledAt = fromMS(at)
	return r, nil
}

// Prune deletes the records of requests handled more than
// age ago and returns how many it deleted.
func (q *RequestQuery) Prune(ctx context.Context, age time.Duration) (int64, error) {
	return txValue(ctx, q.db, func(tx *Tx) (int64, error) {
		res, err := tx.stx.ExecContext(ctx, `DELETE FROM handled_requests WHERE handled_at < ?`, toMS(tx.now().Add(-age)))
		if err != nil {
			return 0, fmt.Errorf("prune handled requests: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("prune handled requests: %w", err)
		}
		return n, nil
	})
}

// Unit is work that commits together with an outbox row enqueued by
// another package: the IPC host's record of the send_message request that
// asked for the row, with the file the row carries. It is a value passed to
// the code that enqueues the row (the router's SendMessage), which applies
// it inside its own transaction, right after the insert, with the stored
// row; an error from Apply rolls the row back with it.
type Unit interface {
	Apply(ctx context.Context, tx *Tx, it OutboxItem) error
}
