package home

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
}

func ownerOf(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// makeDeep makes depth nested directories named name under dir, through
// descriptors (the path is far longer than PATH_MAX), with a file in the
// deepest, and returns the number made.
func makeDeep(t *testing.T, dir, name string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, "bottom", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
	unix.Close(fd)
}

// deepOwners returns how many of the levels under dir (and the file at the
// bottom) are not owned by uid.
func deepOwners(t *testing.T, dir, name string, uid uint32) (levels, wrong int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { unix.Close(fd) }()
	for {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, "bottom", &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			if st.Uid != uid {
				wrong++
			}
			return levels, wrong
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = next
		levels++
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != uid {
			wrong++
		}
	}
}

// A deep tree of long names (the path is ~500 KB) is walked in time and
// memory linear in it: every level changes owner, and the walk allocates a
// small fraction of what materialising each level's path would.
func TestChownDeepTreeIsLinear(t *testing.T) {
	needRoot(t)
	h, dir := newHome(t)
	g := filepath.Join(dir, "groups", "family")
	if err := os.MkdirAll(g, 0o755); err != nil {
		t.Fatal(err)
	}
	const depth = 2000
	name := strings.Repeat("d", 250)
	makeDeep(t, g, name, depth)
	tr, err := h.Group("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	if err := tr.Chown(61000, 61000); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	levels, wrong := deepOwners(t, g, name, 61000)
	if levels != depth || wrong != 0 {
		t.Errorf("%d levels found, %d not owned by 61000; want %d, 0", levels, wrong, depth)
	}
	// One path per level would be depth²/2 × 251 bytes ≈ 500 MB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("the walk allocated %d bytes; want under 8 MiB for %d levels", alloc, depth)
	}
	t.Logf("walk took %s", took)
	if took > 5*time.Second {
		t.Errorf("the walk took %s; want well under 5 s for %d levels", took, depth)
	}
}

// A wide tree with files and subdirectories interleaved: every entry is
// reached (the walk resumes each directory where it left it).
func TestChownReachesEveryEntry(t *testing.T) {
	needRoot(t)
	h, dir := newHome(t)
	g := filepath.Join(dir, "groups", "family")
	var all []string
	for i := range 40 {
		sub := filepath.Join(g, fmt.Sprintf("sub%02d", i), "inner")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		all = append(all, sub, filepath.Dir(sub))
		for j := range 30 {
			for _, d := range []string{g, sub} {
				p := filepath.Join(d, fmt.Sprintf("f%02d-%02d-%s", i, j, strings.Repeat("x", 40)))
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				all = append(all, p)
			}
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(g, "link")); err != nil {
		t.Fatal(err)
	}
	all = append(all, filepath.Join(g, "link"))
	tr, err := h.Group("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Chown(61000, 61001); err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if u, gid := ownerOf(t, p); u != 61000 || gid != 61001 {
			t.Errorf("%s owned by %d:%d; want 61000:61001", p, u, gid)
		}
	}
	if u, _ := ownerOf(t, "/etc/passwd"); u != 0 {
		t.Errorf("the link's target changed owner to %d", u)
	}
}

// A file outside the tree, hard-linked into it, keeps its owner; the skip
// is reported once, with the first such file; a file with several links
// that is the container's already is not reported.
func TestChownLeavesHardLinkedFiles(t *testing.T) {
	needRoot(t)
	var logs bytes.Buffer
	dir := t.TempDir()
	h, err := New(dir, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(dir, "groups", "family")
	if err := os.MkdirAll(filepath.Join(g, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	outsideDir := t.TempDir()
	var victims []string
	for i := range 3 {
		p := filepath.Join(outsideDir, fmt.Sprintf("shadow%d", i))
		if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 4321, 4321); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(p, filepath.Join(g, "sub", fmt.Sprintf("linked%d", i))); err != nil {
			t.Skipf("cannot hard-link across the test's directories: %v", err)
		}
		victims = append(victims, p)
	}
	mine := filepath.Join(g, "mine")
	if err := os.WriteFile(mine, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(mine, 61000, 61000); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(mine, filepath.Join(g, "mine2")); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(g, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
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
	for _, v := range victims {
		if u, gid := ownerOf(t, v); u != 4321 || gid != 4321 {
			t.Errorf("%s, outside the tree, now owned by %d:%d; want 4321:4321", v, u, gid)
		}
	}
	if u, _ := ownerOf(t, plain); u != 61000 {
		t.Errorf("a plain file owned by %d; want 61000", u)
	}
	out := logs.String()
	if n := strings.Count(out, `"linked_skipped":3`); n != 1 {
		t.Errorf("want one report of 3 skipped links; log:\n%s", out)
	}
	if !strings.Contains(out, `"first_linked":"groups/family/sub/linked`) {
		t.Errorf("the report does not name the first skipped file; log:\n%s", out)
	}
}

// The walk is done once per tree and owner for the daemon's life: a second
// start does not walk again while the tree's top is the owner's; a new
// daemon (a new Home) walks once more, and a changed owner walks again.
func TestChownOncePerTreeAndOwner(t *testing.T) {
	needRoot(t)
	h, dir := newHome(t)
	g := filepath.Join(dir, "groups", "family")
	if err := os.MkdirAll(g, 0o755); err != nil {
		t.Fatal(err)
	}
	chown := func(h *Home, uid int) {
		t.Helper()
		tr, err := h.Group("family")
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if err := tr.Chown(uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	chown(h, 61000)
	late := filepath.Join(g, "late")
	if err := os.WriteFile(late, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	chown(h, 61000)
	if u, _ := ownerOf(t, late); u != 0 {
		t.Errorf("a file put in after the walk was given to %d by a second walk; want no second walk", u)
	}
	// The top given back to root (or a new directory at the same inode):
	// walked again.
	if err := os.Chown(g, 0, 0); err != nil {
		t.Fatal(err)
	}
	chown(h, 61000)
	if u, _ := ownerOf(t, late); u != 61000 {
		t.Errorf("a top not owned by the container user did not start a walk: late owned by %d", u)
	}
	h2, err := New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(late, 0, 0); err != nil {
		t.Fatal(err)
	}
	chown(h2, 61000)
	if u, _ := ownerOf(t, late); u != 61000 {
		t.Errorf("a restarted daemon did not walk: late owned by %d", u)
	}
	chown(h2, 62000)
	if u, _ := ownerOf(t, late); u != 62000 {
		t.Errorf("a new container uid did not walk: late owned by %d", u)
	}
}

// What the daemon creates in an agent's tree is given to the tree's owner
// at once, so no walk is needed for it.
func TestCreateGivesFileToTreeOwner(t *testing.T) {
	needRoot(t)
	h, dir := newHome(t)
	base := filepath.Join(dir, "data", "ipc", "family", "responses")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, 61000, 61001); err != nil {
		t.Fatal(err)
	}
	tr, err := h.IPC("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r, err := tr.Dir("responses")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.WriteFile("r1.json", []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u, g := ownerOf(t, filepath.Join(base, "r1.json")); u != 61000 || g != 61001 {
		t.Errorf("a response the daemon wrote is owned by %d:%d; want the directory's 61000:61001", u, g)
	}
	// In a root-owned directory, the file stays root's.
	top := filepath.Join(dir, "data", "ipc", "family")
	if err := tr.WriteFile("x", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if u, _ := ownerOf(t, filepath.Join(top, "x")); u != 0 {
		t.Errorf("a file in a root-owned directory was given to %d", u)
	}
}

// An entry on another file system (a mount inside the tree) is neither
// entered nor changed.
func TestChownStaysOnItsFileSystem(t *testing.T) {
	needRoot(t)
	h, dir := newHome(t)
	g := filepath.Join(dir, "groups", "family")
	mnt := filepath.Join(g, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	inner := filepath.Join(mnt, "inner")
	if err := os.WriteFile(inner, nil, 0o644); err != nil {
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
	for _, p := range []string{mnt, inner} {
		if u, _ := ownerOf(t, p); u != 0 {
			t.Errorf("%s, on another file system, now owned by %d; want 0", p, u)
		}
	}
	if u, _ := ownerOf(t, g); u != 61000 {
		t.Errorf("the tree's top owned by %d; want 61000", u)
	}
}
