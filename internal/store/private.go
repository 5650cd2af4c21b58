package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// PrivateDB makes the SQLite database at path, its -wal and its -shm private
// to their owner (0600) under any umask, before SQLite opens it: a missing
// database file is created empty with mode 0600, and SQLite gives the -wal
// and -shm files it creates the database file's mode; files a previous
// version left readable by others are narrowed. The database holds
// messages, and WhatsApp's device keys for whatsapp.db.
func PrivateDB(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("make %s private: %w", p, err)
			}
		}
	}
	return nil
}
