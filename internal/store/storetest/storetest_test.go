package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bridged-app/bridged/internal/store"
)

func TestOpenHomeKeepsTheStoreWhereTheDaemonDoes(t *testing.T) {
	home := t.TempDir()
	db := OpenHome(t, home)
	if _, err := os.Stat(filepath.Join(home, "store", "bridged.db")); err != nil {
		t.Fatalf("store file: %v", err)
	}
	if _, err := db.Groups.Add(context.Background(), store.Group{Chat: "local:main", Folder: "main", Name: "main", IsMain: true}); err != nil {
		t.Fatalf("a fresh store takes a group: %v", err)
	}
}

func TestOpenGivesEachTestItsOwnStore(t *testing.T) {
	a, b := Open(t), Open(t)
	if _, err := a.Groups.Add(context.Background(), store.Group{Chat: "local:main", Folder: "main", Name: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	if gs, err := b.Groups.List(context.Background()); err != nil || len(gs) != 0 {
		t.Fatalf("the second store's groups: %v, %v; want none", gs, err)
	}
}
