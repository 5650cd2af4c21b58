package home

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Group uids are given in order above the base, kept across a reopen, never
// given twice, and run out after MaxGroupUIDs.
func TestGroupUIDs(t *testing.T) {
	l := Layout{Dir: t.TempDir()}
	if err := l.Prepare(); err != nil {
		t.Fatal(err)
	}
	u, err := OpenGroupUIDs(l, 61000)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range []string{"main", "family", "main"} {
		want := map[int]int{0: 61001, 1: 61002, 2: 61001}[i]
		if got, err := u.UID(f); err != nil || got != want {
			t.Errorf("UID(%s) = %d, %v; want %d", f, got, err, want)
		}
	}
	if _, err := u.UID("../x"); err == nil {
		t.Error("UID of a bad folder: no error")
	}
	again, err := OpenGroupUIDs(l, 61000)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := again.UID("family"); got != 61002 {
		t.Errorf("family after a reopen: %d; want 61002", got)
	}
	// The last uid given: the next is past the range.
	if err := os.WriteFile(filepath.Join(l.DataDir(), GroupUIDsName), []byte(`{"base":61000,"uids":{"last":65095}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	full, err := OpenGroupUIDs(l, 61000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := full.UID("one-too-many"); !errors.Is(err, ErrNoGroupUID) {
		t.Errorf("past MaxGroupUIDs: %v; want ErrNoGroupUID", err)
	}
	if err := os.WriteFile(filepath.Join(l.DataDir(), GroupUIDsName), []byte(`{"uids":{"main":0}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGroupUIDs(l, 61000); err == nil {
		t.Error("a file giving uid 0: no error; want one")
	}
}

// The daemon's own uid is never a group's: on rootful Docker a group uid
// is the host's, and the agent would own the home. A file that gives it to
// a group is refused.
func TestGroupUIDsSkipTheDaemons(t *testing.T) {
	l := Layout{Dir: t.TempDir()}
	if err := os.MkdirAll(l.DataDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	u, err := OpenGroupUIDs(l, 61000)
	if err != nil {
		t.Fatal(err)
	}
	u.daemon = 61002
	if got, err := u.UID("a"); err != nil || got != 61001 {
		t.Fatalf("a: %d, %v; want 61001", got, err)
	}
	if got, err := u.UID("b"); err != nil || got != 61003 {
		t.Fatalf("b: %d, %v; want 61003, past the daemon's 61002", got, err)
	}
	data := `{"base":61000,"uids":{"a":` + strconv.Itoa(os.Geteuid()) + `}}`
	if err := os.WriteFile(filepath.Join(l.DataDir(), GroupUIDsName), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGroupUIDs(l, 61000); err == nil {
		t.Errorf("a file giving a group the daemon's own uid (%d) opened; want it refused", os.Geteuid())
	}
}
