package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

func newHome(t *testing.T) (*Home, string) {
	t.Helper()
	dir := t.TempDir()
	h, err := New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}

// outside is a file outside the home with known content.
func outside(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(p, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func assertContent(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("%s holds %q; want %q", p, b, want)
	}
}

func TestWriteFileNeverFollowsLinks(t *testing.T) {
	h, dir := newHome(t)
	target := outside(t)
	ipcDir := filepath.Join(dir, "data", "ipc", "family", "responses")
	if err := os.MkdirAll(ipcDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Links at the final name and at the old-style temporary name.
	for _, n := range []string{"r1.json", "r1.json.tmp"} {
		if err := os.Symlink(target, filepath.Join(ipcDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := h.IPC("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	resp, err := tr.Dir("responses")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	if err := resp.WriteFile("r1.json", []byte(`{"ok":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	assertContent(t, target, "precious")
	assertContent(t, filepath.Join(ipcDir, "r1.json"), `{"ok":true}`)
}

func TestSubdirectoryNotADirectoryIsMovedAsideAndReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(p string) error
		found string
	}{
		{"symlink out", func(p string) error { return os.Symlink(t.TempDir(), p) }, "symlink"},
		{"symlink to a sibling group", func(p string) error { return os.Symlink("../../main/input", p) }, "symlink"},
		{"file", func(p string) error { return os.WriteFile(p, []byte("x"), 0o644) }, "regular file"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "fifo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, dir := newHome(t)
			base := filepath.Join(dir, "data", "ipc", "family")
			if err := os.MkdirAll(base, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.plant(filepath.Join(base, "input")); err != nil {
				t.Fatal(err)
			}
			tr, err := h.IPC("family")
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			in, err := tr.Dir("input")
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if err := in.WriteFile("_close", nil, 0o644); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(filepath.Join(base, "input"))
			if err != nil || !fi.IsDir() {
				t.Fatalf("input is %v (%v); want a real directory", fi, err)
			}
			if _, err := os.Lstat(filepath.Join(base, "input", "_close")); err != nil {
				t.Fatalf("close sentinel not in the group's own input: %v", err)
			}
			got := h.Incidents()
			if len(got) != 1 || got[0].Found != tc.found || got[0].Path != "data/ipc/family/input" || got[0].Group != "family" {
				t.Fatalf("incidents = %+v; want one %s at data/ipc/family/input", got, tc.found)
			}
			if _, err := os.Lstat(filepath.Join(dir, got[0].MovedTo)); err != nil {
				t.Fatalf("moved-aside entry missing: %v", err)
			}
		})
	}
}

func TestGroupFolderSymlinkIsNotFollowed(t *testing.T) {
	h, dir := newHome(t)
	store := filepath.Join(dir, "store")
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "bridged.db"), []byte("db"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "groups"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../store", filepath.Join(dir, "groups", "other")); err != nil {
		t.Fatal(err)
	}
	tr, err := h.Group("other")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Exists("bridged.db") {
		t.Fatal("the group's tree shows the store")
	}
	if err := h.Layout().CheckMountSource(tr.Path()); err != nil {
		t.Fatalf("recreated group folder refused as mount source: %v", err)
	}
	assertContent(t, filepath.Join(store, "bridged.db"), "db")
}

func TestWriteNewRefusesDanglingLink(t *testing.T) {
	h, dir := newHome(t)
	target := filepath.Join(t.TempDir(), "created")
	g := filepath.Join(dir, "groups", "global")
	if err := os.MkdirAll(g, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(g, "CLAUDE.md")); err != nil {
		t.Fatal(err)
	}
	tr, err := h.Global()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	wrote, err := tr.WriteNew("CLAUDE.md", []byte("template"), 0o644)
	if err != nil || wrote {
		t.Fatalf("WriteNew = %v, %v; want false, nil", wrote, err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was created through the link: %v", err)
	}
	wrote, err = tr.WriteNew("other.md", []byte("x"), 0o644)
	if err != nil || !wrote {
		t.Fatalf("WriteNew of a new name = %v, %v; want true, nil", wrote, err)
	}
}

func TestReadFileRefusesWhatIsNotRegular(t *testing.T) {
	h, dir := newHome(t)
	req := filepath.Join(dir, "data", "ipc", "family", "requests")
	if err := os.MkdirAll(req, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(req, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside(t), filepath.Join(req, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(req, "big.json"), make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(req, "ok.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := h.IPC("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r, err := tr.Dir("requests")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for name, want := range map[string]error{"fifo.json": ErrNotRegular, "link.json": ErrNotRegular, "big.json": ErrTooLarge, "ok.json": nil} {
		_, err := r.ReadFile(name, 1024)
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("ReadFile(%s) = %v; want %v", name, err, want)
		}
	}
}

func TestListIsBounded(t *testing.T) {
	h, dir := newHome(t)
	req := filepath.Join(dir, "data", "ipc", "family", "requests")
	if err := os.MkdirAll(filepath.Join(req, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(req, fmt.Sprintf("%04d.json", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"x.json.tmp", ".hidden"} {
		if err := os.WriteFile(filepath.Join(req, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := h.IPC("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r, err := tr.Dir("requests")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	names, more, err := r.List(64)
	if err != nil || len(names) != 64 || !more {
		t.Fatalf("List(64) = %d names, more %v, %v; want 64, true", len(names), more, err)
	}
	names, more, err = r.List(5000)
	if err != nil || len(names) != 1000 || more {
		t.Fatalf("List(5000) = %d names, more %v, %v; want 1000, false", len(names), more, err)
	}
	if names[0] != "0000.json" || names[999] != "0999.json" {
		t.Fatalf("names not sorted: %s … %s", names[0], names[999])
	}
}

func TestRenameStaysInTree(t *testing.T) {
	h, dir := newHome(t)
	base := filepath.Join(dir, "data", "ipc", "family")
	if err := os.MkdirAll(filepath.Join(base, "requests"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := h.IPC("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Rename("requests/x", "../../../store/x"); err == nil {
		t.Fatal("rename out of the tree succeeded")
	}
}

func TestChownThroughRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	h, dir := newHome(t)
	target := outside(t)
	g := filepath.Join(dir, "groups", "family")
	if err := os.MkdirAll(filepath.Join(g, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g, "sub", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(g, "link")); err != nil {
		t.Fatal(err)
	}
	tr, err := h.Group("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Chown(61000, 61000); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{g, filepath.Join(g, "sub", "f"), filepath.Join(g, "link")} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 61000 {
			t.Errorf("%s owned by %d; want 61000", p, st.Uid)
		}
	}
	fi, _ := os.Stat(target)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid == 61000 {
		t.Error("the link's target outside the tree changed owner")
	}
}

func TestCheckMountSource(t *testing.T) {
	dir := t.TempDir()
	l := Layout{Dir: dir}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "groups", "ok"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "store"), 0o755))
	must(os.Symlink("../store", filepath.Join(dir, "groups", "evil")))
	must(os.Symlink("store", filepath.Join(dir, "linked")))
	must(os.MkdirAll(filepath.Join(dir, "real"), 0o755))
	for src, ok := range map[string]bool{
		filepath.Join(dir, "groups", "ok"):       true,
		filepath.Join(dir, "groups", "evil"):     false,
		filepath.Join(dir, "linked", "sub"):      false,
		filepath.Join(dir, "groups", "missing"):  false,
		dir:                                      false,
		filepath.Join(t.TempDir(), "elsewhere"):  true, // the allowlist's to check
		filepath.Join(dir, "real", "..", "real"): true,
	} {
		err := l.CheckMountSource(src)
		if (err == nil) != ok {
			t.Errorf("CheckMountSource(%s) = %v; want ok=%v", strings.TrimPrefix(src, dir), err, ok)
		}
	}
}

func TestRecreatedDirectoryKeepsTheAgentsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("owners other than the daemon's need root")
	}
	h, dir := newHome(t)
	base := filepath.Join(dir, "data", "ipc", "family")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, 61000, 61001); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(base, "requests")); err != nil {
		t.Fatal(err)
	}
	tr, err := h.IPC("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r, err := tr.Dir("requests")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	fi, err := os.Lstat(filepath.Join(base, "requests"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || st.Uid != 61000 || st.Gid != 61001 {
		t.Fatalf("recreated requests/ is %v owned by %d:%d; want a directory owned by 61000:61001", fi.Mode(), st.Uid, st.Gid)
	}
}

// Existing opens a group's folder only when a real directory is there, and
// makes nothing: a dry run that reads with it leaves the home as it was.
func TestExistingMakesNothing(t *testing.T) {
	h, dir := newHome(t)
	if _, ok, err := h.Existing("fam"); ok || err != nil {
		t.Fatalf("Existing in an empty home: %v, %v; want not there", ok, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "groups")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("groups/ after Existing: %v; want nothing made", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "groups", "fam"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "groups", "fam", "CLAUDE.md"), []byte("memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "groups", "fam"), filepath.Join(dir, "groups", "linked")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.Existing("linked"); ok || err != nil {
		t.Errorf("Existing through a link: %v, %v; want not there", ok, err)
	}
	tr, ok, err := h.Existing("fam")
	if !ok || err != nil {
		t.Fatalf("Existing(fam): %v, %v", ok, err)
	}
	defer tr.Close()
	if b, err := tr.ReadFile("CLAUDE.md", 100); err != nil || string(b) != "memory" {
		t.Errorf("read through Existing: %q, %v", b, err)
	}
}

// What an atomic write cut off by a crash left beside a path goes; the
// path itself, other files' temporaries and look-alikes stay.
func TestRemoveTempsOfAPath(t *testing.T) {
	h, _ := newHome(t)
	g, err := h.Group("fam")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	names := []string{"a.txt", ".a.txt.0123456789abcdef.tmp", ".a.txt.0123456789abcdeg.tmp", ".b.0123456789abcdef.tmp", ".a.txt.01234567.tmp"}
	for _, n := range names {
		if err := g.Put("sub/"+n, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.RemoveTemps("sub/a.txt"); err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		_, err := g.Lstat("sub/" + n)
		if gone := errors.Is(err, fs.ErrNotExist); gone != (i == 1) {
			t.Errorf("%s: gone = %v", n, gone)
		}
	}
	if err := g.RemoveTemps("missing/a.txt"); err != nil {
		t.Errorf("a missing directory: %v", err)
	}
}
