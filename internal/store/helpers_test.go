package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// t0 is the fixed "now" of test databases.
var t0 = time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)

// openTest opens a fresh database in t.TempDir() whose clock reads t0.
func openTest(t *testing.T) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store", "bridged.db")
	migrated.once.Do(func() {
		p := filepath.Join(t.TempDir(), "template.db")
		db, err := Open(context.Background(), p, zerolog.Nop())
		if err == nil {
			err = db.Close()
		}
		if err == nil {
			migrated.data, err = os.ReadFile(p)
		}
		migrated.err = err
	})
	if migrated.err != nil {
		t.Fatalf("migrated template: %v", migrated.err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, migrated.data, 0o600); err != nil {
		t.Fatal(err)
	}
	return openAt(t, path)
}

// migrated is a store migrated once per test binary, which openTest
// copies: a migration under the race detector takes about 0.4 s, a copy
// 45 ms. The tests of migrations themselves open with openAt, which
// migrates for real.
var migrated struct {
	once sync.Once
	data []byte
	err  error
}

func openAt(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path, zerolog.Nop())
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	db.now = func() time.Time { return t0 }
	t.Cleanup(func() { db.Close() })
	return db
}

// addGroup registers chat as folder (not main, trigger required).
func addGroup(t *testing.T, db *DB, chat ChatID, folder Folder) Group {
	t.Helper()
	g, err := db.Groups.Add(context.Background(), Group{Chat: chat, Folder: folder, Name: string(folder), Trigger: "@Andy", RequiresTrigger: true})
	if err != nil {
		t.Fatalf("AddGroup(%s): %v", folder, err)
	}
	return g
}

// count returns SELECT COUNT(*) FROM table WHERE where.
func count(t *testing.T, db *DB, table, where string, args ...any) int {
	t.Helper()
	var n int
	q := `SELECT COUNT(*) FROM ` + table
	if where != "" {
		q += ` WHERE ` + where
	}
	if err := db.read.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func errorsIsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
