package setting

import (
	"testing"
	"time"
)

func TestRange(t *testing.T) {
	r := Range[int]{Min: 1, Max: 10, Want: "want 1 to 10"}
	for v, ok := range map[int]bool{0: false, 1: true, 10: true, 11: false, -1: false} {
		if err := r.Check(v); (err == nil) != ok {
			t.Errorf("Check(%d) = %v; want ok %t", v, err, ok)
		}
	}
	if err := r.Check(0); err == nil || err.Error() != "want 1 to 10" {
		t.Errorf("Check(0) = %v; want the Want text", err)
	}
	off := Range[time.Duration]{Min: time.Second, Max: time.Hour, ZeroOff: true, Want: "w"}
	if off.Check(0) != nil || off.Check(time.Millisecond) == nil || off.Check(time.Minute) != nil {
		t.Error("ZeroOff: 0 and 1m accepted, 1ms refused")
	}
}
