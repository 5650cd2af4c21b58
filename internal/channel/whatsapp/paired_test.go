package whatsapp

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// A device store the daemon created but nobody paired is not paired, and
// asking creates nothing where there is no store.
func TestStorePairedUnpairedStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "whatsapp.db")
	if ok, err := StorePaired(ctx, path); ok || err != nil {
		t.Fatalf("no store: %v, %v; want not paired", ok, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("StorePaired created %s: %v", path, err)
	}
	ds, err := openStore(ctx, path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := StorePaired(ctx, path); ok || err != nil {
		t.Errorf("a store never paired, open: %v, %v; want not paired", ok, err)
	}
	ds.Close()
	// Closed (the daemon stopped): asking leaves no -wal or -shm behind.
	if ok, err := StorePaired(ctx, path); ok || err != nil {
		t.Errorf("a store never paired, closed: %v, %v; want not paired", ok, err)
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("asking a closed store left %s: %v", filepath.Base(p), err)
		}
	}
}
