package home

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ScanDepth is how deep Tree.Scan descends: a directory further down is
// reported (ScanEntry.Deep) and not entered.
const ScanDepth = 64

// ScanNames is how many entries of one directory Tree.Scan reads: an
// agent may make millions, and their names alone would fill the daemon's
// memory. The rest are left out, and an entry with Truncated says so.
const ScanNames = 250_000

// ScanEntry is one entry of a tree as Tree.Scan met it, described by
// lstat: a symlink is the link itself.
type ScanEntry struct {
	Path         string // slash-separated, relative to the tree
	Mode         uint32 // st_mode: type and permission bits
	Size         int64
	Dev, Ino     uint64
	Nlink        uint64
	Mtime, Ctime int64 // nanoseconds since the epoch
	// Target is a symlink's target, as stored in the link (never followed).
	Target string
	// Deep: a directory below ScanDepth, not entered.
	Deep bool
	// Truncated marks the directory Path had more than ScanNames entries:
	// the rest were not read. Only Path is set.
	Truncated bool
}

// IsDir, IsRegular and IsLink say what the entry is; anything else is a
// special file (a fifo, socket or device).
func (e ScanEntry) IsDir() bool     { return e.Mode&unix.S_IFMT == unix.S_IFDIR }
func (e ScanEntry) IsRegular() bool { return e.Mode&unix.S_IFMT == unix.S_IFREG }
func (e ScanEntry) IsLink() bool    { return e.Mode&unix.S_IFMT == unix.S_IFLNK }

// Kind names the entry's type for a person ("fifo", "socket", …).
func (e ScanEntry) Kind() string { return kind(e.Mode) }

// Scan walks the tree depth first, each directory's entries in name order,
// and calls visit for every entry below the tree's top. Nothing is
// followed: a directory is entered through openat(O_NOFOLLOW|O_DIRECTORY)
// from its parent's descriptor, a symlink is reported with its target,
// and a fifo, socket or device is reported and never opened. For a regular
// file, open opens it for reading (O_NOFOLLOW|O_NONBLOCK) and checks that
// it is still the file reported; it is valid only during the call. visit
// returning fs.SkipDir for a directory leaves it unentered; any other error
// stops the walk and is returned. An entry that vanishes or changes type
// while the walk runs is skipped or reported as found (the agent may write
// its tree meanwhile).
func (t *Tree) Scan(visit func(e ScanEntry, open func() (*os.File, error)) error) error {
	fd, err := unix.Openat(t.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return t.pathErr("scan", ".", err)
	}
	return t.scanDir(fd, "", 0, visit)
}

// scanDir scans the directory open as fd (which it closes), whose path in
// the tree is rel.
func (t *Tree) scanDir(fd int, rel string, depth int, visit func(ScanEntry, func() (*os.File, error)) error) error {
	d := &ScanDir{t: t, fd: fd, rel: rel, depth: depth}
	defer d.Close()
	return d.entries(func(e ScanEntry, open func() (*os.File, error)) error {
		err := visit(e, open)
		if errors.Is(err, fs.SkipDir) {
			return nil
		}
		if err != nil || !e.IsDir() || e.Deep || e.Truncated {
			return err
		}
		sub, err := d.Sub(path.Base(e.Path))
		if err != nil {
			if errors.Is(err, ErrVanished) {
				return nil // swapped since the stat: the agent is changing its tree
			}
			return err
		}
		return t.scanDir(sub.fd, e.Path, depth+1, visit)
	})
}

// ErrVanished: a directory Tree.Scan or ScanDir.Sub was to enter is gone,
// or no longer a directory (the agent is changing its tree).
var ErrVanished = errors.New("gone or no longer a directory")

// ScanDir is one directory of a tree, opened without following anything,
// for a caller that walks the tree itself (entering only the directories
// it wants). Close it when done.
type ScanDir struct {
	t     *Tree
	fd    int
	rel   string
	depth int
}

// OpenScan opens the tree's top for reading its entries.
func (t *Tree) OpenScan() (*ScanDir, error) {
	fd, err := unix.Openat(t.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, t.pathErr("scan", ".", err)
	}
	return &ScanDir{t: t, fd: fd}, nil
}

// Sub opens the subdirectory name of d (openat with O_NOFOLLOW and
// O_DIRECTORY). ErrVanished: it is gone or not a directory.
func (d *ScanDir) Sub(name string) (*ScanDir, error) {
	p := path.Join(d.rel, name)
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			err = fmt.Errorf("%w: %w", ErrVanished, err)
		}
		return nil, d.t.pathErr("scan", p, err)
	}
	return &ScanDir{t: d.t, fd: fd, rel: p, depth: d.depth + 1}, nil
}

// Fd is the directory's descriptor, valid until Close (to watch the very
// directory opened, through /proc/self/fd).
func (d *ScanDir) Fd() int { return d.fd }

// Close releases the directory.
func (d *ScanDir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Entries calls visit for each entry of d in name order, as Tree.Scan
// does, without entering any directory (fs.SkipDir is not needed). An
// entry that vanishes while it is read is skipped.
func (d *ScanDir) Entries(visit func(e ScanEntry, open func() (*os.File, error)) error) error {
	return d.entries(visit)
}

func (d *ScanDir) entries(visit func(ScanEntry, func() (*os.File, error)) error) error {
	t, fd, rel, depth := d.t, d.fd, d.rel, d.depth
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return t.pathErr("scan", rel, err)
	}
	dir := os.NewFile(uintptr(dup), rel)
	defer dir.Close()
	if _, err := unix.Seek(dup, 0, io.SeekStart); err != nil { // the offset is shared with fd
		return t.pathErr("scan", rel, err)
	}
	var names []string
	truncated := false
	for {
		chunk, err := dir.Readdirnames(4096)
		names = append(names, chunk...)
		if errors.Is(err, io.EOF) || err == nil && len(chunk) == 0 {
			break
		}
		if err != nil {
			return t.pathErr("scan", rel, err)
		}
		if len(names) >= ScanNames {
			truncated = true
			break
		}
	}
	slices.Sort(names)
	if truncated {
		if err := visit(ScanEntry{Path: rel, Truncated: true}, nil); err != nil && !errors.Is(err, fs.SkipDir) {
			return err
		}
	}
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return t.pathErr("scan", p, err)
		}
		e := ScanEntry{Path: p, Mode: st.Mode, Size: st.Size, Dev: st.Dev, Ino: st.Ino, Nlink: uint64(st.Nlink),
			Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
		switch {
		case e.IsLink():
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
					continue // gone, or no longer a link
				}
				return t.pathErr("scan", p, err)
			}
			e.Target = string(buf[:n])
		case e.IsDir() && depth+1 >= ScanDepth:
			e.Deep = true
		}
		var open func() (*os.File, error)
		if e.IsRegular() {
			open = func() (*os.File, error) { return openEntry(fd, name, p, st) }
		}
		if err := visit(e, open); err != nil {
			return err
		}
	}
	return nil
}

// openEntry opens dir/name for reading without following a link or
// blocking on a fifo, and checks it is the regular file st described.
func openEntry(dir int, name, rel string, st unix.Stat_t) (*os.File, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	if now.Mode&unix.S_IFMT != unix.S_IFREG || now.Ino != st.Ino || now.Dev != st.Dev {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w: replaced while opened", ErrNotRegular)}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// splitRel checks rel, a slash-separated path inside a tree, and returns
// its directory part (empty: the tree's top) and its last name.
func splitRel(rel string) (string, string, error) {
	elems := strings.Split(rel, "/")
	for _, e := range elems {
		if err := checkName(e); err != nil {
			return "", "", err
		}
	}
	return path.Join(elems[:len(elems)-1]...), elems[len(elems)-1], nil
}

// parent opens the directory of rel, making each missing level (a level
// that is not a real directory is moved aside, as Dir does), and returns it
// with rel's last name. Close the tree when done.
func (t *Tree) parent(rel string) (*Tree, string, error) {
	dir, name, err := splitRel(rel)
	if err != nil {
		return nil, "", t.pathErr("open", rel, err)
	}
	if dir == "" {
		sub, err := t.descend(nil)
		return sub, name, err
	}
	sub, err := t.Dir(dir)
	return sub, name, err
}

// Put writes data to rel (slash-separated, its directories made where
// missing) atomically with permission perm: whatever was at rel (a
// symlink, a directory's empty shell aside) is replaced, never written
// through.
func (t *Tree) Put(rel string, data []byte, perm os.FileMode) error {
	sub, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.WriteFile(name, data, perm)
}

// PutLink makes rel a symlink to target, atomically replacing whatever
// was there (but a directory).
func (t *Tree) PutLink(rel, target string) error {
	sub, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer sub.Close()
	tmp := tmpName(name)
	if err := unix.Symlinkat(target, sub.fd, tmp); err != nil {
		return t.pathErr("symlink", rel, err)
	}
	if err := unix.Renameat(sub.fd, tmp, sub.fd, name); err != nil {
		_ = unix.Unlinkat(sub.fd, tmp, 0)
		return t.pathErr("symlink", rel, err)
	}
	return nil
}

// Delete removes the entry at rel (a file, link or special file itself;
// an empty directory), if there. A directory on the way that is missing
// means there is nothing to delete; one that is not a real directory is
// moved aside like Dir does.
func (t *Tree) Delete(rel string) error {
	dir, _, err := splitRel(rel)
	if err != nil {
		return t.pathErr("remove", rel, err)
	}
	if dir != "" {
		if _, err := t.root.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	sub, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer sub.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(sub.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return t.pathErr("remove", rel, err)
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(sub.fd, name, flags); err != nil && !errors.Is(err, unix.ENOENT) {
		return t.pathErr("remove", rel, err)
	}
	return nil
}
