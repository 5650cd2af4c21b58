package nanoclaw

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// This file holds the only reads of NanoClaw's own folders (its groups/):
// another program's tree, read while that program is stopped, by name,
// never following a link (the walk does not descend into one, and a file
// is opened with O_NOFOLLOW). Everything written into bridged's trees, and
// every read of them, goes through internal/home.

// walkSource walks NanoClaw's folder src, calling visit for each entry, as
// filepath.WalkDir does (links are reported, not followed).
func walkSource(src string, visit fs.WalkDirFunc) error {
	return filepath.WalkDir(src, visit)
}

// readRegular reads the regular file at p without following a link.
func readRegular(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|nofollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, limit+1))
}
