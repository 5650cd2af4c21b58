package home

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// MountSource returns the identity of the directory it walked to, refuses a
// link anywhere on the way, under the home and outside it alike, and keeps
// CheckMountSource's answers.
func TestMountSource(t *testing.T) {
	dir := t.TempDir()
	l := Layout{Dir: dir}
	outside := t.TempDir()
	for _, d := range []string{filepath.Join(dir, "groups", "ok"), filepath.Join(dir, "store"), filepath.Join(outside, "real", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "groups", "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		filepath.Join(dir, "groups", "evil"): "../store",
		filepath.Join(outside, "linked"):     "real",
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	ino := func(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }

	ok := filepath.Join(dir, "groups", "ok")
	fi, err := l.MountSource(ok)
	if err != nil {
		t.Fatalf("MountSource(groups/ok): %v", err)
	}
	want, _ := os.Stat(ok)
	if !os.SameFile(fi, want) {
		t.Errorf("MountSource(groups/ok) = inode %d; want the directory's, %d", ino(fi), ino(want))
	}
	if fi, err := l.MountSource(filepath.Join(dir, "groups", "file")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("MountSource(groups/file) = %v, %v; want the regular file", fi, err)
	}
	if fi, err := l.MountSource(filepath.Join(outside, "real", "sub")); err != nil || !fi.IsDir() {
		t.Errorf("MountSource of a path without links outside the home = %v, %v; want the directory", fi, err)
	}
	for _, src := range []string{
		filepath.Join(dir, "groups", "evil"),
		filepath.Join(outside, "linked", "sub"), // the allowlist resolved it: a link now is a change
		filepath.Join(outside, "missing"),
		dir,
		"relative/path",
		"/",
	} {
		if _, err := l.MountSource(src); !errors.Is(err, ErrUnsafeMount) {
			t.Errorf("MountSource(%s) = %v; want ErrUnsafeMount", src, err)
		}
	}
	// CheckMountSource still leaves the paths outside the home to the
	// allowlist.
	if err := l.CheckMountSource(filepath.Join(outside, "linked", "sub")); err != nil {
		t.Errorf("CheckMountSource outside the home = %v; want nil", err)
	}
}
