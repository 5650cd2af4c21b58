package main

import (
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel/whatsapp"
)

// doctor shows the whatsmeow version and its age, and warns once it is
// older than 60 days.
func TestDoctorShowsWhatsmeowAge(t *testing.T) {
	lib := whatsapp.Library{Version: "v0.0.0-20260821141805-33cfac511629", Date: time.Date(2026, 8, 21, 14, 18, 5, 0, time.UTC)}
	tests := []struct {
		name   string
		lib    whatsapp.Library
		found  bool
		now    time.Time
		status string
		want   []string
	}{
		{"fresh", lib, true, lib.Date.Add(10 * 24 * time.Hour), "ok", []string{lib.Version, "2026-08-21", "10 days old"}},
		{"old", lib, true, time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), "warn", []string{"96 days old", "update bridged", "405"}},
		{"tagged", whatsapp.Library{Version: "v0.1.0"}, true, lib.Date, "ok", []string{"v0.1.0", "date unknown"}},
		{"no build info", whatsapp.Library{}, false, lib.Date, "warn", []string{"no module versions"}},
	}
	for _, tt := range tests {
		c := checkWhatsmeow(tt.lib, tt.found, tt.now)
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
