package e2e

// Extra mounts (issue 9 item 7): set with `bridged groups set --mount`,
// checked against the mount allowlist when set, and mounted with every
// blocked name inside hidden by an empty read-only mount, so the agent sees
// the directory's other files but not the keys, and cannot remove the mask.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestE2EExtraMounts(t *testing.T) {
	parallel(t, light)
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testExtraMounts(t, u)
		})
	}
}

func testExtraMounts(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")

	// An allowed root outside the home, holding a project whose owner left
	// a key and a .env in it, readable by anyone: without masks the agent
	// would read them.
	base := t.TempDir()
	allowed := filepath.Join(base, "allowed")
	share := filepath.Join(allowed, "project")
	files := map[string]string{
		"readme.md":       "visible",
		"sub/notes.txt":   "notes",
		".ssh/id_rsa":     "PRIVATE KEY",
		"sub/.env":        "TOKEN=secret",
		"a/b/c/plain.txt": "deep",
	}
	for name, data := range files {
		p := filepath.Join(share, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The agent may write the project (it is mounted read-write for main),
	// whatever uid its container runs as; the daemon's user must read the
	// allowlist.
	for _, d := range []string{filepath.Dir(base), base, allowed, share, filepath.Join(share, "sub"), filepath.Join(share, ".ssh")} {
		mode := os.FileMode(0o755)
		if strings.HasPrefix(d, share) {
			mode = 0o777
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	allowlist := filepath.Join(base, "mount-allowlist.json")
	if err := os.WriteFile(allowlist, []byte(`{"allowedRoots": [{"path": "`+allowed+`", "allowReadWrite": true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.extraEnv = append(e.extraEnv, "BRIDGED_MOUNT_ALLOWLIST="+allowlist)

	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	// Set with the daemon stopped: the allowlist file decides.
	if out := e.mustCLI("groups", "set", "--mount", share+":proj:rw", "main"); !strings.Contains(out, share+":proj:rw") {
		t.Fatalf("groups set --mount printed %q; want the mount", out)
	}
	d := e.start()

	// Refused while the daemon runs, with the allowlist's own words, and
	// nothing changes.
	_, err := e.cli("groups", "set", "--mount", "/etc", "main")
	if want := "mount refused: /etc: not under an allowed root of " + allowlist; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("groups set --mount /etc got %v; want %q", err, want)
	}
	if out := e.mustCLI("groups", "list"); !strings.Contains(out, share+":proj:rw") {
		t.Errorf("groups list after a refused change:\n%s\nwant the mount kept", out)
	}

	look := `cd /workspace/extra/proj && echo "R=$(cat readme.md)" && echo "N=$(cat sub/notes.txt)" && echo "D=$(cat a/b/c/plain.txt)" && ` +
		`echo "S=[$(ls -A .ssh)]" && echo "E=$(wc -c < sub/.env)"; echo "K=$(cat .ssh/id_rsa 2>&1)"; true`
	got := e.bash("local:main", look, turnWait)
	t.Logf("the agent's view: %q", got)
	for _, want := range []string{"R=visible", "N=notes", "D=deep", "S=[]", "E=0"} {
		if !strings.Contains(got, want) {
			t.Errorf("the agent's view %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "PRIVATE KEY") || strings.Contains(got, "TOKEN=secret") {
		t.Errorf("the agent read a masked secret: %q", got)
	}

	// The agent tries to get rid of the masks or write through them; it may
	// write the rest of the project.
	attack := `cd /workspace/extra/proj; rm -rf .ssh sub/.env 2>/dev/null; mv .ssh gone 2>/dev/null; mv sub/.env sub/x 2>/dev/null; ` +
		`echo pwned > .ssh/id_rsa 2>/dev/null; echo pwned > sub/.env 2>/dev/null; echo new > new.txt; echo "W=$(cat new.txt)"; true`
	if got := e.bash("local:main", attack, turnWait); !strings.Contains(got, "W=new") {
		t.Errorf("the agent's write to its read-write mount answered %q; want W=new", got)
	}
	for name, want := range map[string]string{".ssh/id_rsa": "PRIVATE KEY", "sub/.env": "TOKEN=secret", "new.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(share, name)); err != nil || string(b) != want {
			t.Errorf("host %s holds %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(share, "gone")); err == nil {
		t.Error("the agent renamed .ssh on the host")
	}
	// The masks' sources stayed empty.
	for _, p := range []string{"data/empty/dir", "data/empty/file"} {
		fi, err := os.Stat(filepath.Join(e.home, p))
		if err != nil || (fi.IsDir() && !isEmptyDir(t, filepath.Join(e.home, p))) || (!fi.IsDir() && fi.Size() != 0) {
			t.Errorf("%s: %v, %v; want it empty", p, fi, err)
		}
	}

	// Cleared, the next container has no extra mount at all (the running
	// one keeps its mounts until it ends: the daemon is restarted).
	e.mustCLI("groups", "set", "--clear-mounts", "main")
	d.stop(t)
	d = e.start()
	if got := e.bash("local:main", `ls -A /workspace/extra 2>/dev/null | wc -l; true`, turnWait); strings.TrimSpace(got) != "0" {
		t.Errorf("after --clear-mounts /workspace/extra lists %q entries; want none", got)
	}
	d.stop(t)
}

func isEmptyDir(t *testing.T, p string) bool {
	t.Helper()
	ents, err := os.ReadDir(p)
	return err == nil && len(ents) == 0
}
