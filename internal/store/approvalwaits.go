package store

import (
	"context"
	"fmt"
	"time"
)

// Asked lists the approval requests of folder asked from from
// until before to (zero: no end), oldest first, at most limit: the waits
// of the turns in that time.
func (q *ApprovalQuery) Asked(ctx context.Context, folder Folder, from, to time.Time, limit int) ([]Approval, error) {
	end := int64(1<<63 - 1)
	if !to.IsZero() {
		end = toMS(to)
	}
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+approvalColumns+` FROM approvals INDEXED BY approvals_folder_asked
		WHERE folder = ? AND asked_at >= ? AND asked_at < ? ORDER BY asked_at, id LIMIT ?`, folder, toMS(from), end, limit)
	if err != nil {
		return nil, fmt.Errorf("approvals of %s: %w", folder, err)
	}
	out, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("approvals of %s: %w", folder, err)
	}
	return out, nil
}
