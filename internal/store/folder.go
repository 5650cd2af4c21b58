package store

import (
	"fmt"
	"strings"
)

// MaxFolderLen is the longest allowed group folder name.
const MaxFolderLen = 64

// reserved reports whether f names one of bridged's own directories.
func reserved(f string) bool {
	switch f {
	case "global", // groups/global: the shared CLAUDE.md
		"ipc", "errors", // data/ipc/errors holds unparseable IPC files
		"data", "store", "logs", "sessions", "tmp":
		return true
	}
	return false
}

// ValidateFolder checks a group folder name: 1 to 64 characters, lowercase
// letters, digits and dashes, starting with a letter or digit, and not a
// reserved name (global, ipc, errors, data, store, logs, sessions, tmp). The
// error wraps ErrInvalidFolder and names the folder and the rule it breaks.
func ValidateFolder(f string) error {
	bad := func(rule string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidFolder, f, rule)
	}
	if f == "" {
		return bad("the name is empty")
	}
	if len(f) > MaxFolderLen {
		return bad(fmt.Sprintf("the name is %d characters long; at most %d are allowed", len(f), MaxFolderLen))
	}
	for _, r := range f {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
		case r >= 'A' && r <= 'Z':
			return bad("it must be lowercase" + suggestFolder(f))
		default:
			return bad(fmt.Sprintf("it contains %q; only lowercase letters, digits and dashes are allowed", r) + suggestFolder(f))
		}
	}
	if f[0] == '-' {
		return bad("it must start with a lowercase letter or digit")
	}
	if reserved(f) {
		return bad("the name is reserved for bridged's own use")
	}
	return nil
}

// suggestFolder is " (try \"x\")" for the folder x nearest to f that is
// itself accepted (lowercased, each run of other characters a dash), or ""
// when there is none.
func suggestFolder(f string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(f) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > MaxFolderLen {
		s = strings.TrimRight(s[:MaxFolderLen], "-")
	}
	if s == "" || s == f || ValidateFolder(s) != nil {
		return ""
	}
	return fmt.Sprintf(" (try %q)", s)
}
