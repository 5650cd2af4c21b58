package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// Ping fails while another process holds the write lock, and answers again
// once it lets go.
func TestPingNeedsTheWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store", "bridged.db")
	db := openAt(t, path)
	ctx := context.Background()
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := db.Ping(short); err == nil {
		t.Fatal("Ping with the write lock held elsewhere: got nil; want an error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Ping took %s with a 200ms deadline", d)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping once the lock is free: %v", err)
	}
}
