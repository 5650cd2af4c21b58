package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store"
)

// --allow me admits the owner only, goes alone, and groups list shows it.
func TestAllowMe(t *testing.T) {
	tests := []struct {
		flags []string
		want  []string // nil: an error
	}{
		{[]string{"me"}, []string{store.AllowOwner}},
		{[]string{"ME"}, []string{store.AllowOwner}},
		{[]string{"everyone"}, []string{}},
		{[]string{"local:bob", "admins"}, []string{"local:bob", store.AllowAdmins}},
		{[]string{"me", "local:bob"}, nil},
		{[]string{"local:bob", "me"}, nil},
	}
	for _, tt := range tests {
		var f allowFlags
		for _, s := range tt.flags {
			if err := f.Set(s); err != nil {
				t.Fatal(err)
			}
		}
		got, err := f.list()
		switch {
		case tt.want == nil && (err == nil || !strings.Contains(err.Error(), "--allow me: give it alone")):
			t.Errorf("--allow %v = %v, %v; want refused: me goes alone", tt.flags, got, err)
		case tt.want != nil && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("--allow %v = %v, %v; want %v", tt.flags, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		g    control.Group
		want string
	}{
		{control.Group{Allow: []string{store.AllowOwner}}, "you only"},
		{control.Group{Allow: []string{store.AllowOwner}, Others: store.OthersDrop}, "you only (others dropped)"},
		{control.Group{Allow: []string{"local:bob"}}, "you, local:bob"},
		{control.Group{}, "everyone"},
	} {
		if got := formatAllow(tt.g); got != tt.want {
			t.Errorf("formatAllow(%v, %q) = %q; want %q", tt.g.Allow, tt.g.Others, got, tt.want)
		}
	}
}
