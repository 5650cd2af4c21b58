package e2e

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // makes the daemon's database refuse its start-up pruning
)

// A start whose recovery fails (here the store refuses to prune the old
// records of handled requests, Recover's first step) ends with the reason
// and leaves no control socket behind: the socket is bound before the
// recovery, as the lock against a second daemon, and released when the
// start fails.
func TestE2EFailedRecoveryLeavesNoSocket(t *testing.T) {
	parallel(t, light)
	e := newEnv(t)
	e.start().stop(t) // a home that ran before

	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.home, "store", "bridged.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO handled_requests (folder, request_id, type, response, handled_at) VALUES ('main', 'old', 'send_message', '{}', 0)`,
		`CREATE TRIGGER refuse_prune BEFORE DELETE ON handled_requests BEGIN SELECT RAISE(ABORT, 'pruning refused by the test'); END`,
	} {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = e.cli("run", "--image", testImage)
	if err == nil {
		t.Fatal("the daemon ran although its start-up recovery failed")
	}
	if !strings.Contains(err.Error(), "pruning refused by the test") {
		t.Errorf("the failed start says %v; want the recovery's reason", err)
	}
	if _, err := os.Lstat(filepath.Join(e.home, "bridged.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind after the recovery failed: %v", err)
	}
}
