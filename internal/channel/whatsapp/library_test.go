package whatsapp

import (
	"runtime/debug"
	"testing"
	"time"
)

func TestPseudoVersionTime(t *testing.T) {
	tests := []struct {
		v    string
		want time.Time
		ok   bool
	}{
		{"v0.0.0-20260821141805-33cfac511629", time.Date(2026, 8, 21, 14, 18, 5, 0, time.UTC), true},
		{"v0.10.1-0.20260820140024-eb612d936fde", time.Date(2026, 8, 20, 14, 0, 24, 0, time.UTC), true},
		{"v1.2.3-pre.0.20250101000000-abcdefabcdef", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"v0.5.0", time.Time{}, false},
		{"(devel)", time.Time{}, false},
	}
	for _, tt := range tests {
		got, ok := PseudoVersionTime(tt.v)
		if ok != tt.ok || !got.Equal(tt.want) {
			t.Errorf("PseudoVersionTime(%q) = %s, %v; want %s, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLibraryFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "go.mau.fi/util", Version: "v0.10.1-0.20260820140024-eb612d936fde"},
		{Path: LibraryModule, Version: "v0.0.0-20260821141805-33cfac511629"},
	}}
	lib, ok := libraryIn(bi)
	if !ok || lib.Version != "v0.0.0-20260821141805-33cfac511629" || !lib.Date.Equal(time.Date(2026, 8, 21, 14, 18, 5, 0, time.UTC)) {
		t.Errorf("libraryIn = %+v, %v; want the pinned whatsmeow of 2026-08-21", lib, ok)
	}
	if _, ok := libraryIn(&debug.BuildInfo{}); ok {
		t.Errorf("libraryIn without whatsmeow: ok; want not found")
	}
}
