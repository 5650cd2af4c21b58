package rules

import (
	"fmt"
	"math"
)

// RoundUSD rounds an amount of USD to a millionth of a dollar, the
// precision costs are reported with: sums of per-turn costs carry float
// noise (0.30000000000000004) no reader wants in JSON.
func RoundUSD(usd float64) float64 {
	if math.IsNaN(usd) || math.IsInf(usd, 0) {
		return usd
	}
	return math.Round(usd*1e6) / 1e6
}

// FormatUSD shows an amount of USD to a person, in cents: "$1.23", "$0.00"
// for nothing, and "<$0.01" for a cost that is not nothing but rounds to
// no cent (a short turn), never "$0.00".
func FormatUSD(usd float64) string {
	switch {
	case usd > 0 && usd < 0.005:
		return "<$0.01"
	case usd < 0 && usd > -0.005:
		return "-<$0.01"
	}
	return fmt.Sprintf("$%.2f", usd)
}
