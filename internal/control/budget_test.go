package control

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// A daily budget is set and lifted through the API, and the group list and
// the status show a group whose budget is used up as paused until midnight.
func TestBudgetShowsInGroupsAndStatus(t *testing.T) {
	ctx := context.Background()
	h := start(t, Live{})
	if _, err := h.client.AddGroup(ctx, GroupAdd{Chat: "local:fam", Name: "fam"}); err != nil {
		t.Fatalf("AddGroup: %v", err)
	}
	two := 2.0
	g, err := h.client.UpdateGroup(ctx, "fam", GroupPatch{BudgetDailyUSD: &two})
	if err != nil {
		t.Fatalf("UpdateGroup: %v", err)
	}
	if g.BudgetDailyUSD != 2 {
		t.Errorf("budget got %v; want 2", g.BudgetDailyUSD)
	}
	if h.sync.n.Load() == 0 {
		t.Errorf("the daemon was not told that the group changed")
	}
	neg := -1.0
	if _, err := h.client.UpdateGroup(ctx, "fam", GroupPatch{BudgetDailyUSD: &neg}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative budget got %v; want ErrInvalid", err)
	}
	// Yesterday's cost does not count; today's does.
	now := time.Now()
	for _, u := range []store.APIUsage{{Folder: "fam", CostUSD: 5, At: now.Add(-48 * time.Hour)}, {Folder: "fam", CostUSD: 2.5, At: now}} {
		if err := h.db.Usage.AddAPI(ctx, u); err != nil {
			t.Fatalf("AddAPIUsage: %v", err)
		}
	}
	gs, err := h.client.Groups(ctx)
	if err != nil || len(gs) != 1 {
		t.Fatalf("Groups: %v, %d groups", err, len(gs))
	}
	if got := gs[0]; !got.BudgetPaused || got.CostTodayUSD != 2.5 || got.PausedUntil == nil || !got.PausedUntil.After(now) {
		t.Errorf("got paused %v, cost today %v, until %v; want paused at 2.5 until after now", got.BudgetPaused, got.CostTodayUSD, got.PausedUntil)
	}
	st, err := h.client.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(st.BudgetPaused) != 1 || st.BudgetPaused[0] != "fam" {
		t.Errorf("status budget paused got %v; want [fam]", st.BudgetPaused)
	}
	zero := 0.0
	if _, err := h.client.UpdateGroup(ctx, "fam", GroupPatch{BudgetDailyUSD: &zero}); err != nil {
		t.Fatalf("lift budget: %v", err)
	}
	gs, err = h.client.Groups(ctx)
	if err != nil {
		t.Fatalf("Groups: %v", err)
	}
	if gs[0].BudgetPaused || gs[0].BudgetDailyUSD != 0 {
		t.Errorf("after lifting got paused %v, budget %v; want not paused, no budget", gs[0].BudgetPaused, gs[0].BudgetDailyUSD)
	}
}
