package store

import (
	"context"
	"fmt"
	"strings"
)

// Import stores t under its own id (a task brought over from another
// install, whose id its owner knows) and returns it as stored. The id must
// start with "task-" and hold only lowercase letters, digits and dashes;
// ErrExists if a task holds it already. Unlike Tasks.Create it keeps
// t.CreatedAt when set.
func (q *TaskTx) Import(ctx context.Context, t Task) (Task, error) {
	if err := t.check(); err != nil {
		return Task{}, fmt.Errorf("import task: %w", err)
	}
	id := string(t.ID)
	if !strings.HasPrefix(id, "task-") || len(id) > 80 || strings.ContainsFunc(id, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-'
	}) {
		return Task{}, fmt.Errorf("import task: %w: task id %q", ErrInvalid, id)
	}
	var taken bool
	if err := q.tx.stx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?)`, t.ID).Scan(&taken); err != nil {
		return Task{}, fmt.Errorf("import task %s: %w", t.ID, err)
	}
	if taken {
		return Task{}, fmt.Errorf("import task %s: %w", t.ID, ErrExists)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = q.tx.now()
	}
	t.CreatedAt = fromMS(toMS(t.CreatedAt))
	if err := q.insert(ctx, t); err != nil {
		return Task{}, fmt.Errorf("import task %s: %w", t.ID, err)
	}
	return t, nil
}

// Import stores a task under its own id (see TaskTx.Import).
func (q *TaskQuery) Import(ctx context.Context, t Task) (Task, error) {
	return txValue(ctx, q.db, func(tx *Tx) (Task, error) { return tx.Tasks.Import(ctx, t) })
}

// ExternalIDs returns the channel ids of chat's stored messages.
func (q *MessageQuery) ExternalIDs(ctx context.Context, chat ChatID) (map[string]MessageID, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT external_id, id FROM messages WHERE chat = ?`, chat)
	if err != nil {
		return nil, fmt.Errorf("stored messages of %s: %w", chat, err)
	}
	defer rows.Close()
	out := map[string]MessageID{}
	for rows.Next() {
		var ext string
		var id MessageID
		if err := rows.Scan(&ext, &id); err != nil {
			return nil, fmt.Errorf("stored messages of %s: %w", chat, err)
		}
		out[ext] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stored messages of %s: %w", chat, err)
	}
	return out, nil
}
