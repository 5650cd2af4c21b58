package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// costHours keeps the usage ledger's sums of the hours gone by, so a page
// reads only the last hours from the store, not every request of the 14
// days its cost plot shows (a busy install's tens of thousands). A ledger
// row is written when its request ends, stamped with its start, so the
// last hour before the current one may still change: it is read again
// each time with the current one.
type costHours struct {
	mu   sync.Mutex
	from time.Time          // the first hour kept
	upTo time.Time          // the hours before it are kept and final
	rows []store.HourlyCost // by hour
}

// costByHour is store.DB.Usage.CostByHour(since), the hours before the last two
// from memory.
func (d *Dashboard) costByHour(ctx context.Context, since time.Time) ([]store.HourlyCost, error) {
	c := &d.costs
	c.mu.Lock()
	defer c.mu.Unlock()
	final := d.opts.Now().Add(-time.Hour).Truncate(time.Hour)
	if c.upTo.IsZero() || since.Before(c.from) || final.Before(c.upTo) {
		c.from, c.upTo, c.rows = since, since, nil
	}
	fresh, err := d.opts.Admin.DB.Usage.CostByHour(ctx, c.upTo)
	if err != nil {
		return nil, err
	}
	keep := c.rows[:0]
	for _, r := range c.rows {
		if !r.Hour.Before(since) {
			keep = append(keep, r)
		}
	}
	c.rows, c.from = keep, since
	var live []store.HourlyCost
	for _, r := range fresh {
		if r.Hour.Before(final) {
			c.rows = append(c.rows, r)
		} else {
			live = append(live, r)
		}
	}
	if final.After(c.upTo) {
		c.upTo = final
	}
	out := make([]store.HourlyCost, 0, len(c.rows)+len(live))
	return append(append(out, c.rows...), live...), nil
}
