package store

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateFolder(t *testing.T) {
	tests := []struct {
		folder string
		ok     bool
		rule   string // part of the error message
	}{
		{"main", true, ""},
		{"family", true, ""},
		{"team-2", true, ""},
		{"9lives", true, ""},
		{strings.Repeat("a", 64), true, ""},
		{"", false, "empty"},
		{"../x", false, `contains '.'`},
		{"a/b", false, `contains '/'`},
		{".hidden", false, `contains '.'`},
		{"Main", false, `lowercase (try "main")`},
		{"global", false, "reserved"},
		{"errors", false, "reserved"},
		{"ipc", false, "reserved"},
		{"-x", false, "must start with"},
		{"a b", false, `contains ' '`},
		{"café", false, `contains 'é'`},
		{strings.Repeat("a", 65), false, "65 characters long; at most 64"},
	}
	for _, tt := range tests {
		t.Run(tt.folder, func(t *testing.T) {
			err := ValidateFolder(tt.folder)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateFolder(%q) = %v; want nil", tt.folder, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidFolder) {
				t.Fatalf("ValidateFolder(%q) = %v; want ErrInvalidFolder", tt.folder, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.rule) {
				t.Errorf("ValidateFolder(%q) = %q; want it to contain %q", tt.folder, msg, tt.rule)
			}
			if !strings.Contains(msg, `"`+tt.folder+`"`) {
				t.Errorf("ValidateFolder(%q) = %q; want it to name the folder", tt.folder, msg)
			}
		})
	}
}
