package store

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// The ledger's cost of a group since a time is its rows' sum, kept current
// as rows are added (the check before each API request reads it), never
// counts an earlier row or another group's, and refuses a negative cost.
func TestAPIUsageLedger(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	day := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	add := func(folder Folder, at time.Time, usd float64) {
		t.Helper()
		if err := db.Usage.AddAPI(ctx, APIUsage{Folder: folder, At: at, Model: "claude-opus-4-1", InputTokens: 1, CostUSD: usd}); err != nil {
			t.Fatal(err)
		}
	}
	cost := func(folder Folder) float64 {
		t.Helper()
		c, err := db.Usage.GroupCostSince(ctx, folder, day)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	add("fam", day.Add(-time.Minute), 100) // yesterday
	add("fam", day.Add(time.Hour), 0.5)
	if c := cost("fam"); c != 0.5 {
		t.Fatalf("cost today %v; want 0.5", c)
	}
	add("fam", day.Add(2*time.Hour), 0.25)
	add("main", day.Add(2*time.Hour), 7)
	add("fam", day.Add(-time.Hour), 3) // late row of yesterday
	if c := cost("fam"); c != 0.75 {
		t.Errorf("cost today after more rows %v; want 0.75", c)
	}
	if c, _ := db.Usage.GroupCostSince(ctx, "fam", day.Add(-24*time.Hour)); c != 103.75 {
		t.Errorf("cost since yesterday %v; want 103.75", c)
	}
	if c, _ := db.Usage.CostSince(ctx, day); c != 7.75 {
		t.Errorf("every group's cost today %v; want 7.75", c)
	}
	for _, bad := range []float64{-1000, math.NaN(), math.Inf(1)} {
		if err := db.Usage.AddAPI(ctx, APIUsage{Folder: "fam", At: day.Add(3 * time.Hour), CostUSD: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("cost %v: %v; want ErrInvalid", bad, err)
		}
	}
	if c := cost("fam"); c != 0.75 {
		t.Errorf("cost today after refused rows %v; want 0.75", c)
	}
}

// Ledger rows past the retention are folded into their day and pruned;
// today's total is not touched.
func TestAPIUsagePruned(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	old := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, u := range []APIUsage{
		{Folder: "fam", At: old, InputTokens: 10, CostUSD: 1},
		{Folder: "fam", At: old.Add(time.Hour), OutputTokens: 5, CostUSD: 2},
		{Folder: "fam", At: now, CostUSD: 0.5},
	} {
		if err := db.Usage.AddAPI(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := db.Usage.GroupCostSince(ctx, "fam", old.Add(-time.Hour)); c != 3.5 {
		t.Fatalf("cost %v; want 3.5", c)
	}
	n, err := db.Prune(ctx, now.Add(-24*time.Hour), 100)
	if err != nil || n.Usage != 2 {
		t.Fatalf("pruned %+v, %v; want 2 usage rows", n, err)
	}
	if c, _ := db.Usage.GroupCostSince(ctx, "fam", old.Add(-time.Hour)); c != 0.5 {
		t.Errorf("cost after pruning %v; want 0.5 (the cached total forgot the pruned rows)", c)
	}
	var requests, in, out int64
	var cost float64
	if err := db.read.QueryRowContext(ctx, `SELECT requests, input_tokens, output_tokens, cost_usd FROM api_usage_daily WHERE folder = 'fam' AND day = '2026-08-01'`).Scan(&requests, &in, &out, &cost); err != nil {
		t.Fatal(err)
	}
	if requests != 2 || in != 10 || out != 5 || cost != 3 {
		t.Errorf("folded day: %d requests, %d in, %d out, $%v; want 2, 10, 5, $3", requests, in, out, cost)
	}
}
