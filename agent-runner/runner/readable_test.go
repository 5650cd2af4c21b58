package runner

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// What claude makes closed in its Claude home (0700 directories, 0600
// files) is opened to the group before a result: the daemon, reading
// through the group's ACL mask under rootless Podman, records the memory
// instead of failing. The transcripts beside it stay as they are.
func TestMemoryKeptReadableToTheDaemon(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".claude")
	mem := filepath.Join(dir, "projects", "-workspace-group", "memory")
	if err := os.MkdirAll(filepath.Join(mem, "topics"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(mem, "MEMORY.md"), filepath.Join(mem, "topics", "dog.md"), filepath.Join(dir, "CLAUDE.md"),
		filepath.Join(dir, "projects", "-workspace-group", "s.jsonl")} {
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "projects"), filepath.Join(dir, "projects", "-workspace-group"), mem, filepath.Join(mem, "topics")} {
		if err := os.Chmod(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(mem, "link")); err != nil {
		t.Fatal(err)
	}
	keepReadable(claudeDir([]string{"PATH=/bin", "HOME=" + home}))
	want := map[string]fs.FileMode{
		dir: 0o750, filepath.Join(dir, "projects"): 0o750, filepath.Join(dir, "projects", "-workspace-group"): 0o750,
		mem: 0o750, filepath.Join(mem, "topics"): 0o750, filepath.Join(mem, "MEMORY.md"): 0o640,
		filepath.Join(mem, "topics", "dog.md"): 0o640, filepath.Join(dir, "CLAUDE.md"): 0o640,
		filepath.Join(dir, "projects", "-workspace-group", "s.jsonl"): 0o600,
	}
	for p, m := range want {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != m {
			t.Errorf("%s: mode %o; want %o", p, fi.Mode().Perm(), m)
		}
	}
}
