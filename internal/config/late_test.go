package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLateWindow(t *testing.T) {
	dir := t.TempDir()
	c, err := resolve(t, []string{"--home", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.LateWindow != 10*time.Minute {
		t.Errorf("default late window = %s; want 10m", c.LateWindow)
	}
	c, err = resolve(t, []string{"--home", dir, "--late-window", "1h"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.LateWindow != time.Hour || c.Values()["BRIDGED_LATE_WINDOW"] != "1h0m0s" {
		t.Errorf("late window = %s (%q); want 1h", c.LateWindow, c.Values()["BRIDGED_LATE_WINDOW"])
	}
	for _, v := range []string{"0", "30s", "soon", "200h"} {
		if _, err := resolve(t, []string{"--home", dir}, map[string]string{"BRIDGED_LATE_WINDOW": v}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "BRIDGED_LATE_WINDOW") {
			t.Errorf("late window %q: err = %v; want invalid BRIDGED_LATE_WINDOW", v, err)
		}
	}
}
