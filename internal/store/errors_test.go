package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// A write the database has no room for fails with an error classed as
// ErrDiskFull, its text still SQLite's; the data written before stays.
func TestTxDiskFullIsClassified(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	g := addGroup(t, db, "fam@g.us", "fam")
	// Cap the file at its current size: the next page SQLite needs is
	// refused as a full disk would (SQLITE_FULL).
	if _, err := db.write.ExecContext(ctx, `PRAGMA max_page_count = 1`); err != nil {
		t.Fatal(err)
	}
	err := db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.stx.ExecContext(ctx, `CREATE TABLE filler(x); INSERT INTO filler VALUES (randomblob(1 << 20))`)
		return err
	})
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Tx on a full database: %v; want an error classed as ErrDiskFull", err)
	}
	if want := "database or disk is full"; err == nil || !strings.Contains(strings.ToLower(err.Error()), want) {
		t.Fatalf("error text %q; want SQLite's %q kept", err, want)
	}
	if got, err := db.Groups.ByFolder(ctx, g.Folder); err != nil || got.Chat != g.Chat {
		t.Fatalf("GetGroupByFolder after the full disk: %+v, %v; want the group kept", got, err)
	}
}

// classify sets the class only on a full disk, keeps the text, and keeps
// every other class reachable.
func TestClassifyDiskFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		full bool
	}{
		{"SQLITE_FULL", codedErr{"database or disk is full", 13}, true},
		{"extended SQLITE_FULL", fmt.Errorf("commit transaction: %w", codedErr{"full", 13 | 2<<8}), true},
		{"ENOSPC", fmt.Errorf("write: %w", syscall.ENOSPC), true},
		{"a trigger's text", codedErr{"database or disk is full", 19}, true},
		{"a constraint", codedErr{"UNIQUE constraint failed: groups.folder", 19}, false},
		{"not found", fmt.Errorf("group fam: %w", ErrNotFound), false},
		{"nil", nil, false},
	} {
		got := classify(tc.err)
		if errors.Is(got, ErrDiskFull) != tc.full {
			t.Errorf("%s: classify(%v) is ErrDiskFull: %v; want %v", tc.name, tc.err, !tc.full, tc.full)
		}
		if tc.err != nil && (got.Error() != tc.err.Error() || !errors.Is(got, tc.err)) {
			t.Errorf("%s: classify(%v) = %v; want the same text, wrapping it", tc.name, tc.err, got)
		}
	}
	if err := classify(fmt.Errorf("x: %w", ErrNotFound)); !errors.Is(err, ErrNotFound) {
		t.Errorf("classify lost ErrNotFound: %v", err)
	}
}

// codedErr is an error with an SQLite result code, as the driver's are.
type codedErr struct {
	msg  string
	code int
}

func (e codedErr) Error() string { return e.msg }
func (e codedErr) Code() int     { return e.code }
