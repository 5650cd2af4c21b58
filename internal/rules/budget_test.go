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
