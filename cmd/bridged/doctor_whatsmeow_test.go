package main

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel/whatsapp"
)

// doctor shows the whatsmeow version and its age when bridged was built
// (the binary's vcs.time; the clock only when that is unknown), and warns
// once it is older than 60 days.
func TestDoctorShowsWhatsmeowAge(t *testing.T) {
	lib := whatsapp.Library{Version: "v0.0.0-20260821141805-33cfac511629", Date: time.Date(2026, 8, 21, 14, 18, 5, 0, time.UTC)}
	tests := []struct {
		name   string
		lib    whatsapp.Library
		found  bool
		built  time.Time
		now    time.Time
		status string
		want   []string
	}{
		{"fresh", lib, true, time.Time{}, lib.Date.Add(10 * 24 * time.Hour), "ok", []string{lib.Version, "2026-08-21", "10 days old today (this binary's build time is unknown)"}},
		{"old", lib, true, time.Time{}, time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), "warn", []string{"96 days old today", "update bridged", "405"}},
		// Built 10 days after the release: 10 days old, whatever the clock says.
		{"built fresh", lib, true, lib.Date.Add(10 * 24 * time.Hour), time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC), "ok", []string{"10 days old when this binary was built (2026-08-31)"}},
		{"built stale", lib, true, lib.Date.Add(90 * 24 * time.Hour), lib.Date.Add(91 * 24 * time.Hour), "warn", []string{"90 days old when this binary was built", "update bridged"}},
		{"tagged", whatsapp.Library{Version: "v0.1.0"}, true, time.Time{}, lib.Date, "ok", []string{"v0.1.0", "date unknown"}},
		{"no build info", whatsapp.Library{}, false, time.Time{}, lib.Date, "warn", []string{"no module versions"}},
	}
	for _, tt := range tests {
		c := checkWhatsmeow(tt.lib, tt.found, tt.built, tt.now)
		if c.status != tt.status {
			t.Errorf("%s: status %s; want %s (%+v)", tt.name, c.status, tt.status, c)
		}
		for _, w := range tt.want {
			if !strings.Contains(c.detail+" "+c.hint, w) {
				t.Errorf("%s: %q lacks %q", tt.name, c.detail+" → "+c.hint, w)
			}
		}
	}
}

// The build time is the binary's vcs.time.
func TestBuildTime(t *testing.T) {
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "2026-08-31T10:00:00Z"}}}
	if got := buildTimeIn(bi); !got.Equal(time.Date(2026, 8, 31, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("buildTimeIn = %s; want 2026-08-31T10:00:00Z", got)
	}
	if got := buildTimeIn(&debug.BuildInfo{}); !got.IsZero() {
		t.Errorf("buildTimeIn without vcs.time = %s; want zero", got)
	}
}
