package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// A database (and -wal, -shm) an older version left readable by others is
// made private when bridged opens it; a new one is created private.
func TestOpenMakesDatabasePrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store", "bridged.db")
	db, err := Open(context.Background(), path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", filepath.Base(p), fi.Mode(), err)
		}
	}
	db.Close()
	for _, p := range []string{path, path + "-wal"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := PrivateDB(path); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s left %o by an older version: %o after PrivateDB; want 0600", filepath.Base(p), 0o644, fi.Mode().Perm())
		}
	}
}
