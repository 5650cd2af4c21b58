package home

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Grant lets the agent's uid do in the tree what the owner may, and what
// the agent makes there later the daemon may read and remove: checked with
// a shell running as the agent's uid, then as another daemon uid.
func TestGrantLetsTheAgentInAndTheDaemonBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root to run a shell as other uids")
	}
	const agent, daemon = 61234, 61235
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(dir, "groups", "family")
	if err := os.MkdirAll(filepath.Join(top, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "notes", "old.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The daemon (uid daemon) owns the tree, as a daemon that is not root does.
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, daemon, daemon)
	}); err != nil {
		t.Fatal(err)
	}
	h, err := New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := h.Group("family")
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if err := tree.run(walkOp{uid: agent, gid: agent, grant: true, self: daemon}); err != nil {
		t.Fatalf("grant: %v", err)
	}
	sh := func(uid int, script string) error {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = top
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if err := sh(agent, "echo new >> notes/old.txt && mkdir -p deep/er && echo mine > deep/er/mine.txt && chmod 0644 deep/er/mine.txt"); err != nil {
		t.Fatalf("the agent in its granted tree: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(top, "deep", "er", "mine.txt"), &st); err != nil || st.Uid != agent {
		t.Fatalf("the agent's file: %v, owner %d; want %d", err, st.Uid, agent)
	}
	if err := sh(daemon, "cat deep/er/mine.txt >/dev/null && rm -r deep notes"); err != nil {
		t.Fatalf("the daemon reads and removes the agent's files: %v", err)
	}
	if err := sh(61236, "echo x > other.txt"); err == nil {
		t.Error("a third uid wrote into the tree; want it refused")
	}
}

// ACLSupported says yes where Grant works, leaving nothing behind, and
// no, with the reason, where it cannot try.
func TestACLSupported(t *testing.T) {
	dir := t.TempDir()
	if err := ACLSupported(dir); err != nil {
		t.Fatalf("ACLSupported on %s: %v; want the file system's ACLs taken", dir, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the probe left %v", left)
	}
	if err := ACLSupported(filepath.Join(dir, "missing")); err == nil {
		t.Error("ACLSupported of a missing directory said yes")
	}
}
