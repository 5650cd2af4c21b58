package rules

import (
	"math"
	"time"
)

// BudgetWarnShare is the share of its daily budget at which the owner is
// told that a group is about to be paused.
const BudgetWarnShare = 0.8

// BudgetDay returns the start and the end of now's day in loc (nil: UTC),
// the day a group's daily budget covers: the same day as the cost today
// that `bridged status` shows.
func BudgetDay(now time.Time, loc *time.Location) (start, end time.Time) {
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// OverBudget reports whether cost has used up a daily budget (0: no
// budget, never used up).
func OverBudget(budget, cost float64) bool { return budget > 0 && cost >= budget }

// NearBudget reports whether cost has reached BudgetWarnShare of a daily
// budget (0: no budget).
func NearBudget(budget, cost float64) bool { return budget > 0 && cost >= budget*BudgetWarnShare }

// MaxReportedTurnCostUSD is the most one turn's cost the CLI reports is
// believed to be: more is not a turn's cost but a forged or broken figure.
const MaxReportedTurnCostUSD = 1000

// PlausibleReportedCost reports whether usd, a turn's cost as the CLI
// reports it, is one a turn can cost: finite, at least 0 and at most
// MaxReportedTurnCostUSD. The proxy's meter is what budgets count; the
// reported cost is only a cross-check.
func PlausibleReportedCost(usd float64) bool {
	return !math.IsNaN(usd) && usd >= 0 && usd <= MaxReportedTurnCostUSD
}

// BudgetHeld reports whether a group's requests in flight, counted at
// their worst case (held), may use up what its daily budget leaves after
// cost: a further request waits until they end (0: no budget, never). A
// request is let through while anything is left after those in flight, and
// reserves its own worst case, so a crossing overshoots the budget by at
// most one request's reserve.
func BudgetHeld(budget, cost, held float64) bool { return budget > 0 && cost+held >= budget }
