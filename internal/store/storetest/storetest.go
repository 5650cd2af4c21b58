// Package storetest opens throwaway stores for tests of the packages above
// the store. It is imported by tests only.
package storetest

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/migrations"
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
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if len(names) < version {
		t.Fatalf("store before version %d: only %d migrations", version, len(names))
	}
	for i, n := range names[:version] {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, string(b)); err != nil {
			t.Fatalf("apply %s: %v", n, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, i+1, n); err != nil {
			t.Fatal(err)
		}
	}
	return db
}
