// Package storetest opens throwaway stores for tests of the packages above
// the store. It is imported by tests only.
package storetest

import (
	"context"
	"database/sql"
	"path/filepath"
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
