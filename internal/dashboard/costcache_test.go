package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// The cost plot's hours gone by come from memory and the last ones from the
// store: what is added in the current hour (or the one before) shows, and
// the totals match the store's.
func TestCostByHourKeepsHoursGoneBy(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
	*f.clock = now
	add := func(at time.Time, cost float64) {
		t.Helper()
		if err := f.db.Usage.AddAPI(ctx, store.APIUsage{Folder: "fam", At: at, Model: "m", CostUSD: cost}); err != nil {
			t.Fatal(err)
		}
	}
	add(now.Add(-5*time.Hour), 1)
	add(now.Add(-30*time.Minute), 2)
	since := now.Add(-24 * time.Hour)
	sum := func() float64 {
		t.Helper()
		rows, err := f.d.costByHour(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for _, r := range rows {
			s += r.CostUSD
		}
		want, err := f.db.Usage.CostByHour(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(rows) {
			t.Fatalf("costByHour = %v; the store says %v", rows, want)
		}
		return s
	}
	if got := sum(); got != 3 {
		t.Fatalf("cost = %v; want 3", got)
	}
	add(now.Add(-10*time.Minute), 4)  // this hour
	add(now.Add(-70*time.Minute), 8)  // the hour before: may still change
	*f.clock = now.Add(2 * time.Hour) // two hours on: 11:00 is final now
	add(now.Add(90*time.Minute), 16)  // a new hour
	if got := sum(); got != 31 {
		t.Fatalf("cost = %v; want 31", got)
	}
}
