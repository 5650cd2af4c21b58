package home

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// The ownership walk (Tree.Chown) gives an agent's tree to the container's
// uid:gid when the daemon runs as root. The tree is the agent's, and the
// agent may change it while the walk runs, so the walk:
//
//   - holds at most two directory descriptors at a time and never a path:
//     it enters a directory with openat(O_NOFOLLOW|O_DIRECTORY) and climbs
//     back with "..", checking that ".." is the directory it came from
//     (device and inode), and resumes reading it at the offset it left;
//     memory is one inode, one offset and one name per level of the current
//     directory, so the work and the memory are linear in the tree;
//   - never leaves the tree's file system (an entry on another device is
//     skipped) and follows no link: each entry is changed through a
//     descriptor of the entry itself (O_PATH|O_NOFOLLOW, then fchownat with
//     AT_EMPTY_PATH), checked once it is open;
//   - leaves alone anything but a directory that has more than one link and
//     is not the container's already (a hard link may be the only name
//     inside the home of a file outside it), and reports those in one line;
//   - runs once per tree and owner for the life of the daemon: a tree whose
//     top is already owned by uid:gid and was walked for them since the
//     daemon started is not walked again. Files the daemon makes in a tree
//     afterwards are given to the tree's owner when made (Create), and
//     whatever the agent makes is its own already.

// walkBuf is the size of one directory read.
const walkBuf = 8 << 10

// walkKey is a tree walked for an owner: the tree's top by device and
// inode, and the owner.
type walkKey struct {
	dev, ino uint64
	uid, gid int
	grant    bool
}

// walkLevel is one directory on the way from the tree's top down to the
// directory being read: its inode, where to resume reading it, and its
// name (for the report only).
type walkLevel struct {
	ino  uint64
	off  int64
	name string
}

// walkStats counts what a walk did.
type walkStats struct {
	entries, changed int
	linked           int    // non-directories with more than one link, left alone
	firstLinked      string // the first of them, relative to the home
	otherFS          int    // entries on another file system, left alone
	firstOtherFS     string
	private          int // the agent's directories closed to the daemon (Grant), left alone
	firstPrivate     string
}

// Chown gives the tree and everything in it to uid:gid (see the walk above:
// no link is followed, no other file system entered, no file with more than
// one link changed). Entries that vanish or change type during the walk are
// skipped; entries already owned by uid:gid are left alone. A tree already
// walked for uid:gid since the daemon started, whose top is still theirs, is
// not walked again.
func (t *Tree) Chown(uid, gid int) error {
	return t.run(walkOp{uid: uid, gid: gid})
}

// Grant gives uid (and gid) the owner's rights on the tree and everything in
// it with POSIX ACLs, for a daemon that cannot give files away (not root):
// the daemon keeps owning what it made, and each directory's default ACL
// grants both uid and the daemon what the owner has on what is made in it
// later, whoever makes it. Entries the daemon does not own (the agent's,
// which inherited the grant) are left alone; otherwise the walk is
// Chown's: no link followed, no other file system entered, no file with
// more than one link changed, once per tree and uid for the daemon's life.
func (t *Tree) Grant(uid, gid int) error {
	return t.run(walkOp{uid: uid, gid: gid, grant: true, self: os.Geteuid()})
}

// walkOp is what the walk does to each entry: give it to uid:gid (chown),
// or grant them it by ACL (grant).
type walkOp struct {
	uid, gid int
	grant    bool
	self     int // the daemon's uid (grant)
}

// done reports whether the entry needs nothing.
func (op walkOp) done(st *unix.Stat_t) bool {
	if op.grant {
		return int(st.Uid) != op.self
	}
	return int(st.Uid) == op.uid && int(st.Gid) == op.gid
}

// apply changes the entry open at fd (a directory, or an O_PATH
// descriptor of anything else).
func (op walkOp) apply(fd int, st *unix.Stat_t) error {
	if !op.grant {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return unix.Fchown(fd, op.uid, op.gid)
		}
		return unix.Fchownat(fd, "", op.uid, op.gid, unix.AT_EMPTY_PATH)
	}
	return grantACL(fd, st, op.uid, op.gid, op.self)
}

func (t *Tree) run(op walkOp) error {
	uid, gid := op.uid, op.gid
	var st unix.Stat_t
	if err := unix.Fstat(t.fd, &st); err != nil {
		return t.pathErr("chown", ".", err)
	}
	key := walkKey{dev: st.Dev, ino: st.Ino, uid: uid, gid: gid, grant: op.grant}
	owned := op.grant || int(st.Uid) == uid && int(st.Gid) == gid
	t.h.mu.Lock()
	_, done := t.h.walked[key]
	t.h.mu.Unlock()
	if done && owned {
		return nil
	}
	start := time.Now()
	stats, err := t.walk(op)
	if err != nil {
		return err
	}
	log := t.h.log.Debug()
	if stats.linked > 0 || stats.otherFS > 0 {
		log = t.h.log.Warn()
	}
	log.Str("group", t.group).Str("tree", t.rel).Int("entries", stats.entries).Int("changed", stats.changed).
		Int("linked_skipped", stats.linked).Str("first_linked", stats.firstLinked).
		Int("other_fs_skipped", stats.otherFS).Str("first_other_fs", stats.firstOtherFS).
		Int("private_skipped", stats.private).Str("first_private", stats.firstPrivate).
		Dur("took", time.Since(start)).
		Msg("ownership walk: tree given to the container user; files with more than one link and other file systems left alone")
	t.h.mu.Lock()
	if t.h.walked == nil {
		t.h.walked = make(map[walkKey]struct{})
	}
	t.h.walked[key] = struct{}{}
	t.h.mu.Unlock()
	return nil
}

// walk changes the owner of the tree's entries depth first, one directory
// at a time (see the package's walk notes above).
func (t *Tree) walk(op walkOp) (walkStats, error) {
	var stats walkStats
	// A descriptor of its own (not a dup, which would share the read
	// offset with the tree's).
	fd, err := unix.Openat(t.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return stats, t.pathErr("chown", ".", err)
	}
	defer func() { unix.Close(fd) }()
	var top unix.Stat_t
	if err := unix.Fstat(fd, &top); err != nil {
		return stats, t.pathErr("chown", ".", err)
	}
	stats.entries++
	if !op.done(&top) {
		if err := op.apply(fd, &top); err != nil {
			return stats, t.pathErr("chown", ".", err)
		}
		stats.changed++
	}
	dev := top.Dev
	var above []walkLevel // the directories above the current one, top first
	cur := walkLevel{ino: top.Ino}
	// rel is the current directory's path, built only for a report.
	rel := func(name string) string {
		parts := make([]string, 0, len(above)+2)
		parts = append(parts, t.rel)
		if len(above) > 0 {
			for _, l := range above[1:] {
				parts = append(parts, l.name)
			}
			parts = append(parts, cur.name)
		}
		return shortPath(path.Join(append(parts, name)...))
	}
	buf := make([]byte, walkBuf)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return stats, t.pathErr("chown", rel(""), err)
		}
		if n == 0 {
			// The directory is done: climb back to its parent.
			if len(above) == 0 {
				return stats, nil
			}
			parent := above[len(above)-1]
			pfd, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return stats, t.pathErr("chown", rel(".."), err)
			}
			var pst unix.Stat_t
			if err := unix.Fstat(pfd, &pst); err != nil || pst.Dev != dev || pst.Ino != parent.ino {
				unix.Close(pfd)
				if err == nil {
					err = errors.New("a directory was moved during the ownership walk")
				}
				return stats, t.pathErr("chown", rel(""), err)
			}
			unix.Close(fd)
			fd, cur, above = pfd, parent, above[:len(above)-1]
			if _, err := unix.Seek(fd, cur.off, 0); err != nil {
				return stats, t.pathErr("chown", rel(""), err)
			}
			continue
		}
		descended := false
		for b := buf[:n]; len(b) >= 19 && !descended; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return stats, t.pathErr("chown", rel(""), errors.New("malformed directory entry"))
			}
			off := int64(binary.NativeEndian.Uint64(b[8:16]))
			raw := b[19:reclen]
			if i := bytes.IndexByte(raw, 0); i >= 0 {
				raw = raw[:i]
			}
			b = b[reclen:]
			name := string(raw)
			if name == "." || name == ".." || name == "" {
				continue
			}
			child, ino, err := t.chownEntry(fd, name, dev, op, &stats, rel)
			if err != nil {
				return stats, err
			}
			if child < 0 {
				continue
			}
			// Enter the subdirectory; reading this one resumes after it.
			cur.off = off
			above = append(above, cur)
			unix.Close(fd)
			fd, cur = child, walkLevel{ino: ino, name: name}
			descended = true
		}
	}
}

// chownEntry gives dir/name to uid:gid unless it is theirs, is on another
// device, or is a non-directory with more than one link. For a directory
// on the tree's device it returns an open descriptor of it, for the walk
// to enter, and its inode; otherwise -1.
func (t *Tree) chownEntry(dir int, name string, dev uint64, op walkOp, stats *walkStats, rel func(string) string) (int, uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, 0, nil
		}
		return -1, 0, t.pathErr("chown", rel(name), err)
	}
	stats.entries++
	owned := op.done(&st)
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if !isDir && owned {
		return -1, 0, nil
	}
	openedDir := isDir
	flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if openedDir {
		flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	fd, err := unix.Openat(dir, name, flags, 0)
	if err != nil {
		// Gone, or swapped for something else since the stat: the agent
		// is changing its own tree; leave the entry to it.
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, 0, nil
		}
		// A directory the agent made and closed to everyone else: its own,
		// which its grant (inherited when it was made) already covers.
		if op.grant && owned && errors.Is(err, unix.EACCES) {
			if stats.private == 0 {
				stats.firstPrivate = rel(name)
			}
			stats.private++
			return -1, 0, nil
		}
		return -1, 0, t.pathErr("chown", rel(name), err)
	}
	// From here on, the descriptor is the truth: the name may point
	// elsewhere already.
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, 0, t.pathErr("chown", rel(name), err)
	}
	owned = op.done(&st)
	isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case st.Dev != dev:
		if stats.otherFS == 0 {
			stats.firstOtherFS = rel(name)
		}
		stats.otherFS++
	case !isDir && owned:
	case isDir != openedDir:
		// Swapped for a directory since the stat: the agent is
		// changing its own tree; leave the entry to it.
	case !isDir && st.Nlink > 1:
		if stats.linked == 0 {
			stats.firstLinked = rel(name)
		}
		stats.linked++
	case isDir:
		if !owned {
			if err := op.apply(fd, &st); err != nil {
				unix.Close(fd)
				return -1, 0, t.pathErr("chown", rel(name), err)
			}
			stats.changed++
		}
		return fd, st.Ino, nil
	default:
		// The entry itself, whatever it is (a symlink included): the
		// descriptor was opened without following anything.
		if err := op.apply(fd, &st); err != nil && !errors.Is(err, unix.ENOENT) {
			unix.Close(fd)
			return -1, 0, t.pathErr("chown", rel(name), err)
		}
		stats.changed++
	}
	unix.Close(fd)
	return -1, 0, nil
}

// shortPath keeps a reported path readable: a path of a deep tree keeps
// its start and its end.
func shortPath(p string) string {
	const head, tail = 120, 200
	if len(p) <= head+tail+3 {
		return p
	}
	return p[:head] + "..." + p[len(p)-tail:]
}

// giveToOwner gives a file the daemon just made in the tree (f, open) to
// the owner of the tree's directory when the daemon runs as root and that
// owner is not root: what the daemon puts in an agent's tree is the
// agent's, as if the ownership walk had been run again.
func (t *Tree) giveToOwner(f *os.File) error {
	if os.Geteuid() != 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(t.fd, &st); err != nil {
		return err
	}
	if st.Uid == 0 && st.Gid == 0 {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
