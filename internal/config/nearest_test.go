package config

import "testing"

func TestNearest(t *testing.T) {
	for _, tc := range []struct {
		word string
		want string
	}{
		{"stauts", "status"},
		{"grups", "groups"},
		{"lsit", "list"},
		{"rule", "rules"},
		{"BRIDGED_DASHBORD", "BRIDGED_DASHBOARD"},
		{"BRIDGED_IDEL_TIMEOUT", "BRIDGED_IDLE_TIMEOUT"},
		{"zzzzzzzz", ""},
		{"ls", ""}, // two letters: one edit is half the word, and nothing is that near
		{"status", ""},
	} {
		if got := Nearest(tc.word, []string{"status", "groups", "list", "rules", "BRIDGED_DASHBOARD", "BRIDGED_IDLE_TIMEOUT"}); got != tc.want {
			t.Errorf("Nearest(%q) = %q; want %q", tc.word, got, tc.want)
		}
	}
}
