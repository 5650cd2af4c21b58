// Package storetest opens throwaway stores for tests of the packages above
// the store. It is imported by tests only.
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
)

// Open opens a fresh store in its own temporary directory, closed when the
// test ends. It fails the test if the store cannot be opened.
func Open(t testing.TB) *store.DB {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "bridged.db"))
}

// OpenHome opens a fresh store where the daemon keeps it under home
// (home/store/bridged.db), closed when the test ends.
func OpenHome(t testing.TB, home string) *store.DB {
	t.Helper()
	return OpenAt(t, filepath.Join(home, "store", "bridged.db"))
}

// OpenAt opens the store at path (created with its directory if missing),
// closed when the test ends. It fails the test if the store cannot be
// opened.
func OpenAt(t testing.TB, path string) *store.DB {
	t.Helper()
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := copyTemplate(path); err != nil {
			t.Fatalf("open store %s: %v", path, err)
		}
	}
	db, err := store.Open(context.Background(), path, zerolog.Nop())
	if err != nil {
		t.Fatalf("open store %s: %v", path, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Before writes, at path, a store as a bridged whose last migration was
// version left it, and returns it open for raw SQL (closed when the test
// ends): a test of an upgrade fills it in that schema, closes it and opens
// it with OpenAt, which applies the rest.
func Before(t testing.TB, path string, version int) *sql.DB {
	t.Helper()
	old, err := store.OpenUpTo(context.Background(), path, version, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Fresh writes at path a new store, migrated as store.Open would leave it,
// without opening it: a test that hands a home to code which opens its
// store itself saves the migration's time.
func Fresh(tb testing.TB, path string) {
	tb.Helper()
	if err := copyTemplate(path); err != nil {
		tb.Fatalf("fresh store %s: %v", path, err)
	}
}

// template is a store migrated once per test binary: a new store is a copy
// of it. Migrating a store takes about 0.4 s under the race detector (45 ms
// for a copy), and the packages above the store open one per test. The
// copy is what store.Open makes of a new file, the migrations' applied_at
// times aside; the store's own tests migrate for real.
var template struct {
	once sync.Once
	data []byte
	err  error
}

// copyTemplate writes a migrated store at path (its directory made 0700
// like store.Open makes it).
func copyTemplate(path string) error {
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "bridged-storetest-")
		if err != nil {
			template.err = err
			return
		}
		defer os.RemoveAll(dir)
		p := filepath.Join(dir, "bridged.db")
		db, err := store.Open(context.Background(), p, zerolog.Nop())
		if err != nil {
			template.err = err
			return
		}
		if err := db.Close(); err != nil {
			template.err = err
			return
		}
		template.data, template.err = os.ReadFile(p)
	})
	if template.err != nil {
		return fmt.Errorf("migrated template: %w", template.err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, template.data, 0o600)
}
