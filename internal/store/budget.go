package store

import (
	"context"
	"fmt"
	"time"
)

// BudgetVerdict is what a group's daily budget said.
type BudgetVerdict string

// Budget verdicts.
const (
	// BudgetAdmitted: the router handed the waiting messages to the agent
	// within the budget.
	BudgetAdmitted BudgetVerdict = "admitted"
	// BudgetPaused: the router held the waiting messages: the budget was
	// used up.
	BudgetPaused BudgetVerdict = "paused"
	// BudgetRefused: the credential proxy refused an API request of a
	// turn: the budget was used up.
	BudgetRefused BudgetVerdict = "refused"
)

// BudgetDecision is the budget's word on a group, as it was given: the
// budget and the day's spending of that moment.
type BudgetDecision struct {
	Folder Folder
	Chat   ChatID
	// After and Upto bound the messages the router's decision covered:
	// those after After up to Upto. Both 0 for the proxy's refusals.
	After     MessageID
	Upto      MessageID
	Verdict   BudgetVerdict
	BudgetUSD float64
	SpentUSD  float64
	At        time.Time // zero: now
}

// Record records d, unless the decision recorded last for
// d's chat and Upto is the same verdict (the router looks at a group again
// at every new message and wake: one row per change).
func (q *BudgetQuery) Record(ctx context.Context, d BudgetDecision) error {
	if d.At.IsZero() {
		d.At = q.db.now()
	}
	switch d.Verdict {
	case BudgetAdmitted, BudgetPaused, BudgetRefused:
	default:
		return fmt.Errorf("record budget decision of %s: %w: unknown verdict %q", d.Folder, ErrInvalid, d.Verdict)
	}
	return q.db.Tx(ctx, func(tx *Tx) error {
		if d.Upto > 0 {
			var last string
			err := tx.stx.QueryRowContext(ctx, `SELECT COALESCE((SELECT verdict FROM budget_decisions WHERE chat = ? AND upto = ? ORDER BY id DESC LIMIT 1), '')`,
				d.Chat, d.Upto).Scan(&last)
			if err != nil {
				return fmt.Errorf("record budget decision of %s: %w", d.Folder, err)
			}
			if BudgetVerdict(last) == d.Verdict {
				return nil
			}
		}
		if _, err := tx.stx.ExecContext(ctx, `INSERT INTO budget_decisions (folder, chat, after_id, upto, verdict, budget_usd, spent_usd, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			d.Folder, d.Chat, d.After, d.Upto, d.Verdict, d.BudgetUSD, d.SpentUSD, toMS(d.At)); err != nil {
			return fmt.Errorf("record budget decision of %s: %w", d.Folder, err)
		}
		return nil
	})
}

// DecisionsOn returns the router's decisions on chat that covered
// message id (After < id <= Upto), oldest first, at most limit.
func (q *BudgetQuery) DecisionsOn(ctx context.Context, chat ChatID, id MessageID, limit int) ([]BudgetDecision, error) {
	return q.decisions(ctx, `chat = ? AND upto >= ? AND after_id < ? AND upto > 0`, limit, chat, id, id)
}

// Refusals returns the proxy's refusals of folder's requests from
// `from` to `to` (zero: no end), oldest first, at most limit.
func (q *BudgetQuery) Refusals(ctx context.Context, folder Folder, from, to time.Time, limit int) ([]BudgetDecision, error) {
	end := int64(1<<62 - 1)
	if !to.IsZero() {
		end = toMS(to)
	}
	return q.decisions(ctx, `folder = ? AND verdict = 'refused' AND at >= ? AND at <= ?`, limit, folder, toMS(from), end)
}

func (q *BudgetQuery) decisions(ctx context.Context, where string, limit int, args ...any) ([]BudgetDecision, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT folder, chat, after_id, upto, verdict, budget_usd, spent_usd, at FROM budget_decisions
		WHERE `+where+` ORDER BY id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("budget decisions: %w", err)
	}
	out, err := collect(rows, func(r rowScanner) (BudgetDecision, error) {
		var d BudgetDecision
		var at int64
		err := r.Scan(&d.Folder, &d.Chat, &d.After, &d.Upto, &d.Verdict, &d.BudgetUSD, &d.SpentUSD, &at)
		d.At = fromMS(at)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("budget decisions: %w", err)
	}
	return out, nil
}
