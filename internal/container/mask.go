package container

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bridged-app/bridged/internal/home"
)

// Masking blocked entries inside an allowed mount.
//
// The allowlist checks the components of a mount's own path against the
// blocked patterns. An allowed directory may still contain such names — a
// project with a .env, a home-like tree with .ssh/ — so CheckAll also looks
// inside: it walks the mount's host directory MaskDepth levels deep and, for
// every entry whose name matches a blocked pattern, mounts an empty
// read-only directory (over a directory) or an empty read-only file (over
// anything else) at the matching container path. The container sees the
// name but nothing in it, and cannot remove, rename or write through the
// mask. The empty directory and file are daemon-owned:
// <home>/data/empty/dir (mode 0555) and <home>/data/empty/file (0444),
// made on first use.
//
// The walk opens each directory relative to its parent with O_NOFOLLOW and
// never follows a symlink, so a link an agent planted in a read-write mount
// cannot send it anywhere else on the host. Symlinks are not masked: a
// symlink inside a bind mount is resolved by the container, in the
// container's own view of the file system, so whatever name it has it can
// only reach what the container already sees (the target of a link to
// ~/.ssh or /etc is not in the container; a link to an entry inside the
// mount reaches that entry, which is itself masked if blocked). The mount
// root itself has its symlinks resolved before it is checked, as always.
//
// Limits, all documented for the owner: blocked names deeper than MaskDepth
// levels are not masked; a mount with more than MaxMaskScan entries within
// those levels, or more than MaxMasks blocked entries, is refused (mount a
// narrower directory); hard links to secret files under innocent names, and
// secrets inside files, cannot be recognised; what appears after the
// container started is masked from its next start on. A directory the
// daemon cannot read is not searched: the container, running as the
// daemon's uid or an unprivileged one, cannot read it either.
const (
	// MaskDepth is how many levels below a mount's root are searched for
	// blocked names (1: the root's own entries).
	MaskDepth = 3
	// MaxMaskScan is the most entries searched in one mount.
	MaxMaskScan = 20000
	// MaxMasks is the most blocked entries hidden in one mount.
	MaxMasks = 100
)

// masker makes and checks the empty directory and file masks come from.
type masker struct {
	dir, file string
	mu        sync.Mutex
	ready     bool
}

// WithMasks returns a copy of a whose CheckAll hides the blocked entries
// inside each allowed mount (see above), using the empty directory and file
// under l's data/empty/. Without it, a mount that contains a blocked entry
// is refused. A nil a stays nil.
func (a *Allowlist) WithMasks(l home.Layout) *Allowlist {
	if a == nil {
		return nil
	}
	c := *a
	c.masks = &masker{dir: filepath.Join(l.EmptyDir(), "dir"), file: filepath.Join(l.EmptyDir(), "file")}
	return &c
}

// ensure makes the empty directory (0555) and file (0444) if they are
// missing and checks that they are what they should be: a real empty
// directory and a real empty file, not symlinks.
func (m *masker) ensure() (dir, file string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready {
		return m.dir, m.file, nil
	}
	if err := os.MkdirAll(filepath.Dir(m.dir), 0o755); err != nil {
		return "", "", err
	}
	if err := os.Mkdir(m.dir, 0o555); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", "", err
	}
	if err := checkEmpty(m.dir, true); err != nil {
		return "", "", err
	}
	f, err := os.OpenFile(m.file, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o444)
	switch {
	case err == nil:
		f.Close()
	case !errors.Is(err, fs.ErrExist):
		return "", "", err
	}
	if err := checkEmpty(m.file, false); err != nil {
		return "", "", err
	}
	m.ready = true
	return m.dir, m.file, nil
}

// checkEmpty checks that p is an empty directory (dir) or an empty regular
// file, not a symlink, and sets its mode (0555 or 0444).
func checkEmpty(p string, dir bool) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o444)
	switch {
	case dir && fi.IsDir():
		d, err := os.Open(p)
		if err != nil {
			return err
		}
		names, err := d.Readdirnames(1)
		d.Close()
		if len(names) > 0 {
			return fmt.Errorf("%s must be empty", p)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		mode = 0o555
	case !dir && fi.Mode().IsRegular():
		if fi.Size() != 0 {
			return fmt.Errorf("%s must be empty", p)
		}
	default:
		return fmt.Errorf("%s is a %s; want an empty %s", p, fi.Mode().Type(), map[bool]string{true: "directory", false: "file"}[dir])
	}
	if fi.Mode().Perm() != mode {
		return os.Chmod(p, mode)
	}
	return nil
}

// hiddenEntry is a blocked entry inside a mount: its path below the mount's
// root (slash-separated) and whether it is a directory.
type hiddenEntry struct {
	rel string
	dir bool
}

// findBlocked walks src (a resolved directory; anything else has nothing
// inside) MaskDepth levels deep without following symlinks and returns the
// entries whose names match a blocked pattern, in walk order. It does not
// descend into a blocked directory.
func (a *Allowlist) findBlocked(src string) ([]hiddenEntry, error) {
	return a.findBlockedWithin(src, MaxMaskScan, MaxMasks)
}

// findBlockedWithin is findBlocked with its limits given.
func (a *Allowlist) findBlockedWithin(src string, maxScan, maxMasks int) ([]hiddenEntry, error) {
	fd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("search it for blocked names: %w", err)
	}
	w := &blockedWalk{a: a, root: src, maxScan: maxScan, maxMasks: maxMasks}
	if err := w.walk(fd, "", 1); err != nil {
		return nil, err
	}
	return w.found, nil
}

type blockedWalk struct {
	a        *Allowlist
	root     string // the mount's host directory
	maxScan  int
	maxMasks int
	scanned  int
	found    []hiddenEntry
}

// walk searches the directory open at fd (which it closes), rel below the
// mount's root, whose entries are at level depth.
func (w *blockedWalk) walk(fd int, rel string, depth int) error {
	// The file is named by its absolute path: on a file system that does
	// not report entry types, ReadDir finds them with lstat by that name.
	// Nothing is ever opened through it.
	f := os.NewFile(uintptr(fd), filepath.Join(w.root, filepath.FromSlash(rel)))
	defer f.Close()
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			if w.scanned++; w.scanned > w.maxScan {
				return fmt.Errorf("more than %d entries in its top %d levels to search for blocked names; mount a narrower directory", w.maxScan, MaskDepth)
			}
			name := e.Name()
			p := name
			if rel != "" {
				p = rel + "/" + name
			}
			typ := e.Type()
			if _, blocked := w.a.blockedName(name); blocked {
				// What it is now, never following a link.
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					continue // gone since it was listed
				}
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFLNK:
					continue // resolved inside the container: see above
				case unix.S_IFDIR:
					typ = fs.ModeDir
				default:
					typ = 0
				}
				if len(w.found) == w.maxMasks {
					return fmt.Errorf("more than %d entries inside it match blocked patterns; mount a narrower directory", w.maxMasks)
				}
				w.found = append(w.found, hiddenEntry{rel: p, dir: typ.IsDir()})
				continue
			}
			if !typ.IsDir() || depth >= MaskDepth {
				continue
			}
			child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				// Gone, replaced by a link or a file since it was listed,
				// or unreadable (then unreadable to the container too).
				continue
			}
			if err := w.walk(child, p, depth+1); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(entries) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("search %s for blocked names: %w", f.Name(), err)
		}
	}
}
