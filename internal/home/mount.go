package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnsafeMount is returned for a bind-mount source under the home that
// passes through a symlink or is not what a mount expects.
var ErrUnsafeMount = errors.New("unsafe bind-mount source")

// CheckMountSource verifies a bind-mount source right before a container is
// created: a source under the home must be reached from the home component
// by component through real directories, with no symlink anywhere on the
// way (the engine would follow one where the daemon did not), and be a
// directory or a regular file itself. Sources outside the home are the mount
// allowlist's to check and pass here unchanged.
func (l Layout) CheckMountSource(src string) error {
	rel, err := filepath.Rel(l.Dir, src)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil
	}
	if rel == "." {
		return fmt.Errorf("%w: %s is the home itself", ErrUnsafeMount, src)
	}
	cur := l.Dir
	parts := strings.Split(rel, string(filepath.Separator))
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeMount, src, err)
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%w: %s: %s is a symlink", ErrUnsafeMount, src, cur)
		case fi.IsDir():
		case last && fi.Mode().IsRegular():
		default:
			return fmt.Errorf("%w: %s: %s is a %s", ErrUnsafeMount, src, cur, kind(fileType(fi)))
		}
	}
	return nil
}
