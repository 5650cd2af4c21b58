package rules

import (
	"encoding/json"
	"testing"
)

func TestFormatUSD(t *testing.T) {
	for _, tc := range []struct {
		usd  float64
		want string
	}{
		{0, "$0.00"}, {0.000188, "<$0.01"}, {0.0049, "<$0.01"}, {0.005, "$0.01"}, {0.125, "$0.12"}, {1.5, "$1.50"}, {12.345, "$12.35"},
	} {
		if got := FormatUSD(tc.usd); got != tc.want {
			t.Errorf("FormatUSD(%v) = %q; want %q", tc.usd, got, tc.want)
		}
	}
}

// Sums of costs print in JSON without float noise.
func TestRoundUSDInJSON(t *testing.T) {
	sum := 0.1 + 0.2 // 0.30000000000000004
	b, _ := json.Marshal(RoundUSD(sum))
	if string(b) != "0.3" {
		t.Errorf("RoundUSD(0.1+0.2) encodes as %s; want 0.3", b)
	}
	b, _ = json.Marshal(RoundUSD(0.000188))
	if string(b) != "0.000188" {
		t.Errorf("RoundUSD(0.000188) encodes as %s; want 0.000188", b)
	}
}
