package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Under umask 022, the daemon's databases and their -wal and -shm files are
// private to their owner (0600), and doctor, which checks the -wal and -shm
// files too, finds nothing to warn about in what bridged made.
func TestE2EStateFilesPrivateUnderUmask022(t *testing.T) {
	old := syscall.Umask(0o022) // inherited by the daemon and the commands
	t.Cleanup(func() { syscall.Umask(old) })
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.start()
	if got := e.ask("local:main", "hello", 90*time.Second); got != "echo: hello" {
		t.Fatalf("reply %q", got)
	}
	store := filepath.Join(e.home, "store")
	for _, name := range []string{"bridged.db", "bridged.db-wal", "bridged.db-shm", "whatsapp.db", "whatsapp.db-wal", "whatsapp.db-shm"} {
		fi, err := os.Stat(filepath.Join(store, name))
		if err != nil {
			t.Errorf("%s: %v (the daemon holds both databases open in WAL mode)", name, err)
			continue
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("store/%s has mode %o under umask 022; want 0600", name, m)
		}
	}
	doc, _ := e.cli("doctor")
	if strings.Contains(doc, "readable by others") || !strings.Contains(doc, "store and data are private") {
		t.Errorf("doctor:\n%s\nwant no permission warning about the files bridged made", doc)
	}
	// The daemon made whatsapp.db, but nobody paired it.
	if !strings.Contains(doc, "whatsapp     warn  not paired") {
		t.Errorf("doctor:\n%s\nwant whatsapp said not paired in a home never paired", doc)
	}
}
