package main

import (
	"testing"

	"github.com/bridged-app/bridged/internal/control"
)

// The budget column of `groups list` says amounts in cents that make
// sense: "<$0.01" below a cent, "no budget" with none.
func TestBudgetColumnCents(t *testing.T) {
	for _, tc := range []struct {
		g    control.Group
		want string
	}{
		{control.Group{CostTodayUSD: 0.000188}, "no budget"},
		{control.Group{CostTodayUSD: 0.000188, BudgetDailyUSD: 0.0001, BudgetPaused: true}, "<$0.01 of <$0.01 (paused)"},
		{control.Group{CostTodayUSD: 0.000188, BudgetDailyUSD: 2}, "<$0.01 of $2.00"},
		{control.Group{CostTodayUSD: 1.256, BudgetDailyUSD: 2}, "$1.26 of $2.00"},
	} {
		if got := budgetToday(tc.g); got != tc.want {
			t.Errorf("budgetToday(%+v) = %q; want %q", tc.g, got, tc.want)
		}
	}
	if got := formatBudget(0.0001); got != "<$0.01/day" {
		t.Errorf("formatBudget(0.0001) = %q", got)
	}
}
