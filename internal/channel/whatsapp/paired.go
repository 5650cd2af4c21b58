package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// StorePaired reports whether the device store at path holds a paired
// device, reading it without creating or changing anything: a store the
// daemon created on a start but that was never paired (or was logged out)
// is not paired.
func StorePaired(ctx context.Context, path string) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if strings.ContainsAny(path, "?#") {
		return false, fmt.Errorf("whatsapp store path %q: must not contain '?' or '#'", path)
	}
	// Read-only. With no -wal file (no daemon has it open) also immutable,
	// or SQLite would create a -wal and a -shm file for the read and leave
	// them; with one, the daemon's are there to share.
	dsn := "file:" + path + "?mode=ro&_pragma=busy_timeout(5000)"
	if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		dsn = "file:" + path + "?mode=ro&immutable=1"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM whatsmeow_device`).Scan(&n)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read whatsapp store %s: %w", path, err)
	}
	return n > 0, nil
}
