package store

import (
	"regexp"
	"testing"
)

// The folder a refusal suggests is itself accepted.
func TestFolderHintIsAccepted(t *testing.T) {
	try := regexp.MustCompile(`\(try "([^"]*)"\)`)
	for _, tc := range []struct{ folder, want string }{
		{"Team_42", "team-42"},
		{"Team", "team"},
		{"my folder", "my-folder"},
		{"ÄBC", "bc"},
		{"GLOBAL", ""}, // global is reserved: no suggestion
		{"Data_", ""},  // data is reserved
		{"__", ""},     // nothing left
		{"a.b.c", "a-b-c"},
	} {
		err := ValidateFolder(tc.folder)
		if err == nil {
			t.Errorf("%q accepted", tc.folder)
			continue
		}
		m := try.FindStringSubmatch(err.Error())
		got := ""
		if m != nil {
			got = m[1]
			if verr := ValidateFolder(got); verr != nil {
				t.Errorf("%q: suggested %q, itself refused: %v", tc.folder, got, verr)
			}
		}
		if got != tc.want {
			t.Errorf("%q: %v; want the suggestion %q", tc.folder, err, tc.want)
		}
	}
}
