package home

import (
	"os"
	"path/filepath"
	"testing"
)

// A daemon under the unit's umask (0027) made the folders in groups/ 0750
// where it asked for 0755: at the next start they get 0755, which the
// agents of other uids read through (main a folder it sees, every group
// groups/global). A folder whose mode is something else, an owner's
// choice, keeps it.
func TestPrepareWidensUmaskedFolders(t *testing.T) {
	l := Layout{Dir: t.TempDir()}
	if err := l.Prepare(); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"made-under-0027": 0o750, "closed-by-owner": 0o700, GlobalFolder: 0o750} {
		p := filepath.Join(l.GroupsDir(), name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Prepare(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"made-under-0027": 0o755, "closed-by-owner": 0o700, GlobalFolder: 0o755} {
		fi, err := os.Stat(filepath.Join(l.GroupsDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("groups/%s after Prepare: %o; want %o", name, got, want)
		}
	}
}
