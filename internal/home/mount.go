package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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
	if _, ok := l.underHome(src); !ok {
		return nil
	}
	_, err := l.MountSource(src)
	return err
}

// MountSource checks a bind-mount source as CheckMountSource does and
// returns what it found: the file it reached, one component at a time, by
// descriptor (O_PATH|O_NOFOLLOW), so its device and inode are those of the
// very directory (or file) that was checked, whatever is renamed into its
// place afterwards. A source outside the home (an extra mount, which the
// mount allowlist resolved to a path without links) is walked the same way
// from the root: a link on its way now means it changed since the
// allowlist's check, and is refused too.
func (l Layout) MountSource(src string) (os.FileInfo, error) {
	base := "/"
	rel, ok := l.underHome(src)
	switch {
	case ok && rel == ".":
		return nil, fmt.Errorf("%w: %s is the home itself", ErrUnsafeMount, src)
	case ok:
		base = l.Dir
	case !filepath.IsAbs(src):
		return nil, fmt.Errorf("%w: %s is not an absolute path", ErrUnsafeMount, src)
	default:
		rel = strings.TrimPrefix(filepath.Clean(src), "/")
		if rel == "" {
			return nil, fmt.Errorf("%w: %s is the root directory", ErrUnsafeMount, src)
		}
	}
	// The home itself (and the root) may be reached through links: they are
	// the owner's.
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsafeMount, src, &os.PathError{Op: "open", Path: base, Err: err})
	}
	defer func() { unix.Close(fd) }()
	cur := base
	parts := strings.Split(rel, string(filepath.Separator))
	var st unix.Stat_t
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		next, err := unix.Openat(fd, p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnsafeMount, src, &os.PathError{Op: "open", Path: cur, Err: err})
		}
		unix.Close(fd)
		fd = next
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnsafeMount, src, &os.PathError{Op: "stat", Path: cur, Err: err})
		}
		last := i == len(parts)-1
		switch t := st.Mode & unix.S_IFMT; {
		case t == unix.S_IFLNK:
			return nil, fmt.Errorf("%w: %s: %s is a symlink", ErrUnsafeMount, src, cur)
		case t == unix.S_IFDIR:
		case last && t == unix.S_IFREG:
		default:
			return nil, fmt.Errorf("%w: %s: %s is a %s", ErrUnsafeMount, src, cur, kind(st.Mode))
		}
	}
	f := os.NewFile(uintptr(fd), src)
	if f == nil {
		return nil, fmt.Errorf("%w: %s: bad descriptor", ErrUnsafeMount, src)
	}
	fd = -1 // f owns it now
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsafeMount, src, err)
	}
	return fi, nil
}

// underHome returns src relative to the home, and whether it is the home
// or under it.
func (l Layout) underHome(src string) (string, bool) {
	rel, err := filepath.Rel(l.Dir, src)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}
