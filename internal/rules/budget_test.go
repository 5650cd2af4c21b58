package rules

import (
	"math"
	"testing"
)

// A turn's cost as the CLI reports it is believed only when a turn could
// cost it: the agent can forge the line that carries it.
func TestPlausibleReportedCost(t *testing.T) {
	for usd, want := range map[float64]bool{
		0: true, 0.0421: true, 12.5: true, MaxReportedTurnCostUSD: true,
		-1000: false, -0.01: false, MaxReportedTurnCostUSD + 1: false, 1e300: false,
		math.NaN(): false, math.Inf(1): false, math.Inf(-1): false,
	} {
		if got := PlausibleReportedCost(usd); got != want {
			t.Errorf("PlausibleReportedCost(%v) = %v; want %v", usd, got, want)
		}
	}
}

// A request waits while the requests in flight, at their worst, may use up
// what the budget leaves; with nothing held only a used-up budget stops it,
// and no budget never does.
func TestBudgetHeld(t *testing.T) {
	for _, c := range []struct {
		budget, cost, held float64
		want               bool
	}{
		{0, 100, 100, false},
		{1, 0.99, 0, false},
		{1, 0.99, 0.01, true},
		{1, 0.5, 0.4, false},
		{1, 0.5, 0.6, true},
		{1, 1, 0, true},
	} {
		if got := BudgetHeld(c.budget, c.cost, c.held); got != c.want {
			t.Errorf("BudgetHeld(%v, %v, %v) = %v; want %v", c.budget, c.cost, c.held, got, c.want)
		}
	}
}
