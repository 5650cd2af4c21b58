package snapshot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

// takeBoth snapshots f's group with f's service (which lists only what
// its watch saw written) and with a new one (which lists everything), and
// fails unless they record the same; it returns how many directories the
// first listed.
func takeBoth(t *testing.T, f *fixture, what string) int {
	t.Helper()
	g := f.s.group(f.folder)
	g.mu.Lock()
	before := f.s.listed.Load()
	r, _, err := f.s.take(f.folder, g)
	g.mu.Unlock()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	fresh := New(f.s.cfg, f.db, f.s.home, zerolog.Nop())
	defer fresh.Close()
	fg := fresh.group(f.folder)
	want, _, err := fresh.take(f.folder, fg)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if r != want {
		ds, _ := f.s.deltas(want, r)
		var paths []string
		for _, d := range ds {
			paths = append(paths, d.path)
		}
		t.Fatalf("%s: the watched snapshot differs from a full one at %s", what, strings.Join(paths, ", "))
	}
	return int(f.s.listed.Load() - before)
}

// What the agent does to its folder and memory, however it does it, is
// recorded by the watched snapshot exactly as a full listing records it;
// a snapshot after nothing changed lists no directory, and one after a
// write lists that directory and no other.
func TestWatchedSnapshotMissesNothing(t *testing.T) {
	f := newFixture(t, Config{})
	for i := range 5 {
		f.write(f.groupPath(fmt.Sprintf("a/b/c/f%d", i)), "x")
		f.write(f.groupPath(fmt.Sprintf("d%d/g", i)), "y")
	}
	f.write(f.claudePath("projects/-workspace-group/memory/MEMORY.md"), "remember\n")
	f.write(f.claudePath("projects/-workspace-group/s.jsonl"), "{}\n")
	takeBoth(t, f, "first")
	if n := takeBoth(t, f, "nothing changed"); n != 0 {
		t.Errorf("nothing changed: %d directories listed; want none", n)
	}
	f.write(f.groupPath("a/b/c/f3"), "changed")
	if n := takeBoth(t, f, "one file written"); n != 1 {
		t.Errorf("one file written: %d directories listed; want 1", n)
	}
	outside := filepath.Join(f.dir, "outside")
	steps := []struct {
		what string
		do   func() error
	}{
		{"a file made deep down", func() error { return os.WriteFile(f.groupPath("a/b/c/new"), []byte("n"), 0o644) }},
		{"a tree moved in", func() error {
			f.write(filepath.Join(outside, "t/u/v"), "moved")
			return os.Rename(outside, f.groupPath("a/in"))
		}},
		{"a file written in the moved tree", func() error { return os.WriteFile(f.groupPath("a/in/t/u/v"), []byte("again"), 0o644) }},
		{"a directory renamed", func() error { return os.Rename(f.groupPath("a/b"), f.groupPath("d1/b")) }},
		{"a file written in the renamed directory", func() error { return os.WriteFile(f.groupPath("d1/b/c/f0"), []byte("zz"), 0o644) }},
		{"a directory replaced by another of its name", func() error {
			if err := os.RemoveAll(f.groupPath("d2")); err != nil {
				return err
			}
			f.write(f.groupPath("d2/other"), "o")
			return nil
		}},
		{"a file's mode", func() error { return os.Chmod(f.groupPath("d3/g"), 0o600) }},
		{"a directory's mode", func() error { return os.Chmod(f.groupPath("d4"), 0o700) }},
		{"a link replaced", func() error {
			if err := os.Symlink("d3/g", f.groupPath("ln")); err != nil {
				return err
			}
			return nil
		}},
		{"a link pointed elsewhere", func() error {
			os.Remove(f.groupPath("ln"))
			return os.Symlink("elsewhere", f.groupPath("ln"))
		}},
		{"a hard link made", func() error { return os.Link(f.groupPath("d3/g"), f.groupPath("d0/hard")) }},
		{"a file written through its other link", func() error {
			fh, err := os.OpenFile(f.groupPath("d3/g"), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return err
			}
			_, err = fh.WriteString("through the other link")
			return errorsJoin(err, fh.Close())
		}},
		{"memory written", func() error {
			return os.WriteFile(f.claudePath("projects/-workspace-group/memory/MEMORY.md"), []byte("more\n"), 0o644)
		}},
		{"a transcript written (not memory)", func() error {
			return os.WriteFile(f.claudePath("projects/-workspace-group/s.jsonl"), []byte("{}\n{}\n"), 0o644)
		}},
		{"a project's memory made", func() error {
			f.write(f.claudePath("projects/-other/memory/x.md"), "x\n")
			return nil
		}},
		{"a directory made", func() error { return os.Mkdir(f.groupPath("d0/many"), 0o755) }},
		{"more events than the kernel queues", func() error {
			// Each file is two events (made, closed): past the default
			// fs.inotify.max_queued_events (16,384) the queue overflows,
			// and what comes after is lost.
			for i := range 20_000 {
				if err := os.WriteFile(f.groupPath(fmt.Sprintf("d0/many/%05d", i)), nil, 0o644); err != nil {
					return err
				}
			}
			return os.WriteFile(f.groupPath("d4/after-overflow"), []byte("!"), 0o644)
		}},
		{"a directory removed", func() error { return os.RemoveAll(f.groupPath("d0/many")) }},
		{"the other link removed", func() error { return os.Remove(f.groupPath("d0/hard")) }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		takeBoth(t, f, st.what)
	}
	// Where a file had two links, its directory was listed every time.
	takeBoth(t, f, "the last of the two links")
	if n := takeBoth(t, f, "nothing changed at the end"); n != 0 {
		t.Errorf("nothing changed at the end: %d directories listed; want none", n)
	}
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// unreadableChild names the test a child runs as an unprivileged user.
const unreadableChild = "BRIDGED_SNAPSHOT_UNREADABLE_CHILD"

// A directory the agent closed to the daemon does not fail the snapshot:
// the turn is recorded, the directory shown as not recorded (unreadable),
// and once readable again its files are recorded.
func TestUnreadableDirectoryIsRecordedAsSuch(t *testing.T) {
	if os.Getuid() == 0 && os.Getenv(unreadableChild) == "" {
		// Root reads everything: run the test as nobody.
		tmp, err := os.MkdirTemp("", "snap-unreadable-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(tmp) })
		if err := os.Chmod(tmp, 0o777); err != nil {
			t.Fatal(err)
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		bin, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(tmp, "snapshot.test")
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run", "^TestUnreadableDirectoryIsRecordedAsSuch$", "-test.v")
		cmd.Env = append(os.Environ(), unreadableChild+"=1", "TMPDIR="+tmp, "HOME="+tmp)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("as nobody: %v\n%s", err, out)
		}
		return
	}
	f := newFixture(t, Config{})
	f.write(f.groupPath("open/a.txt"), "a\n")
	f.write(f.claudePath("projects/-workspace-group/memory/MEMORY.md"), "m\n")
	c := f.turn(func() {
		f.write(f.groupPath("closed/secret.txt"), "s\n")
		f.write(f.groupPath("open/b.txt"), "b\n")
		for _, p := range []string{f.groupPath("closed"), f.claudePath("projects/-workspace-group")} {
			if err := os.Chmod(p, 0); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Cleanup(func() {
		os.Chmod(f.groupPath("closed"), 0o755)
		os.Chmod(f.claudePath("projects/-workspace-group"), 0o755)
	})
	if !strings.Contains(c.Note, "1 entr(ies) could not be read (closed)") || !strings.Contains(c.Note, "1 entr(ies) could not be read (projects/-workspace-group)") ||
		strings.Contains(c.Note, "not text") {
		t.Errorf("note = %q; want the unreadable entries named", c.Note)
	}
	r, err := f.s.Diff(f.ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fd := range r.Files {
		got = append(got, fd.Op+" "+fd.Path+": "+fd.After)
	}
	want := []string{"added closed: not recorded (unreadable)", "added open/b.txt"}
	for _, w := range want {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("diff = %q; want %q", got, w)
		}
	}
	// Readable again: what is in it is recorded.
	c = f.turn(func() {
		if err := os.Chmod(f.groupPath("closed"), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	r, err = f.s.Diff(f.ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, fd := range r.Files {
		got = append(got, fd.Op+" "+fd.Path)
	}
	if !strings.Contains(strings.Join(got, ","), "closed/secret.txt") {
		t.Errorf("diff once readable = %q; want closed/secret.txt added", got)
	}
}
