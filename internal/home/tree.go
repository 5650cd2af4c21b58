package home

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Errors of reads in a Tree.
var (
	// ErrNotRegular: the entry is a symlink, fifo, device, socket or
	// directory where a regular file was expected. Nothing was opened.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is over the caller's size limit. Nothing was read.
	ErrTooLarge = errors.New("file too large")
	// ErrBadName: a name that is not a single plain path component.
	ErrBadName = errors.New("not a plain file name")
)

// maxIncidents bounds the incidents a Home keeps for status.
const maxIncidents = 50

// Incident is a place in an agent-writable tree where a real directory was
// expected and something else was found. The thing found was moved aside and
// a directory made in its place.
type Incident struct {
	Time    time.Time `json:"time"`
	Group   string    `json:"group,omitempty"` // the folder whose tree it was in
	Path    string    `json:"path"`            // relative to the home
	Found   string    `json:"found"`           // "symlink", "regular file", "fifo", …
	MovedTo string    `json:"moved_to"`        // relative to the home
}

func (i Incident) String() string {
	return fmt.Sprintf("%s was a %s, not a directory: moved aside to %s and recreated", i.Path, i.Found, i.MovedTo)
}

// Home opens the trees of a bridged home. Safe for concurrent use.
type Home struct {
	layout Layout
	log    zerolog.Logger

	mu        sync.Mutex
	incidents []Incident           // the latest maxIncidents, oldest first
	walked    map[walkKey]struct{} // trees the ownership walk has done (Tree.Chown)

	inputMu   sync.Mutex
	inputWake map[string]chan struct{} // per group, closed at the next write to its input (InputChanged)
}

// New returns the home at dir (made absolute). It does not touch the disk.
func New(dir string, log zerolog.Logger) (*Home, error) {
	if dir == "" {
		return nil, errors.New("home: no directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("home %s: %w", dir, err)
	}
	return &Home{layout: Layout{Dir: abs}, log: log.With().Str("component", "home").Logger()}, nil
}

// Layout returns the home's paths.
func (h *Home) Layout() Layout { return h.layout }

// Incidents returns the latest incidents, oldest first.
func (h *Home) Incidents() []Incident {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.incidents)
}

func (h *Home) report(in Incident) {
	h.log.Warn().Str("group", in.Group).Str("path", in.Path).Str("found", in.Found).Str("moved_to", in.MovedTo).
		Msg("agent-writable tree: not a directory where one belongs; moved aside and recreated")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.incidents = append(h.incidents, in)
	if n := len(h.incidents) - maxIncidents; n > 0 {
		h.incidents = slices.Delete(h.incidents, 0, n)
	}
}

// IPC opens data/ipc/<folder>, the group's IPC namespace.
func (h *Home) IPC(folder string) (*Tree, error) {
	return h.open(h.layout.IPCRoot(), folder, folder)
}

// Group opens groups/<folder>, the group's workspace.
func (h *Home) Group(folder string) (*Tree, error) {
	return h.open(h.layout.GroupsDir(), folder, folder)
}

// Global opens groups/global, the shared memory.
func (h *Home) Global() (*Tree, error) {
	return h.open(h.layout.GroupsDir(), GlobalFolder, GlobalFolder)
}

// Claude opens data/sessions/<folder>/.claude, the group's Claude state.
func (h *Home) Claude(folder string) (*Tree, error) {
	return h.open(h.layout.SessionsDir(), folder, folder, ".claude")
}

// open makes the owner-controlled directory base if missing, opens it by
// path, then descends through elems without following anything.
func (h *Home) open(base, group string, elems ...string) (*Tree, error) {
	if err := CheckFolder(elems[0]); err != nil && !(elems[0] == GlobalFolder && len(elems) == 1) {
		return nil, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("open %s: %w", base, err)
	}
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", base, &os.PathError{Op: "open", Path: base, Err: err})
	}
	rel, _ := filepath.Rel(h.layout.Dir, base)
	t := &Tree{h: h, group: group, path: base, rel: filepath.ToSlash(rel), fd: fd}
	defer t.closeFd()
	sub, err := t.descend(elems)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// Tree is one agent-writable directory, opened so that nothing done through
// it can leave it. Close it when done. Safe for concurrent use.
type Tree struct {
	h     *Home
	group string
	path  string // absolute, for mounts and messages
	rel   string // relative to the home, slash-separated
	fd    int    // the directory itself, for descending (-1 once closed)
	root  *os.Root
}

// Path is the tree's absolute path. Use it for a bind mount or a message,
// never to open something.
func (t *Tree) Path() string { return t.path }

// Close releases the tree.
func (t *Tree) Close() error {
	t.closeFd()
	if t.root != nil {
		return t.root.Close()
	}
	return nil
}

func (t *Tree) closeFd() {
	if t.fd >= 0 {
		unix.Close(t.fd)
		t.fd = -1
	}
}

// Dir opens the subdirectory rel (slash-separated) of the tree, making each
// missing level. A level that is not a real directory is moved aside and
// recreated (see the package doc).
func (t *Tree) Dir(rel string) (*Tree, error) {
	elems := strings.Split(rel, "/")
	for _, e := range elems {
		if err := checkName(e); err != nil {
			return nil, fmt.Errorf("open %s/%s: %w", t.rel, rel, err)
		}
	}
	return t.descend(elems)
}

func (t *Tree) descend(elems []string) (*Tree, error) {
	fd, rel, p := t.fd, t.rel, t.path
	for i, name := range elems {
		next, err := t.h.openDir(fd, rel, name, t.group)
		if i > 0 {
			unix.Close(fd)
		}
		if err != nil {
			return nil, err
		}
		fd, rel, p = next, path.Join(rel, name), filepath.Join(p, name)
	}
	if len(elems) == 0 {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", rel, err)
		}
		fd = dup
	}
	// The root is opened through the descriptor just verified, not by
	// name: whatever now sits at the path, the root is this directory.
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	return &Tree{h: t.h, group: t.group, path: p, rel: rel, fd: fd, root: root}, nil
}

// openDir opens parent/name as a directory without following a link. A
// missing directory is made; anything else is moved aside first.
func (h *Home) openDir(parent int, parentRel, name, group string) (int, error) {
	rel := path.Join(parentRel, name)
	made := false
	for range 5 {
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			if made && !hasDefaultACL(parent) {
				// The umask narrowed the mode (the unit's is 0027): an
				// agent of another uid reaches what it may read of a
				// group's folder, or groups/global, through "other".
				// Through the descriptor: the entry may have been
				// replaced since, and one not the daemon's keeps its mode.
				if err := unix.Fchmod(fd, 0o755); err != nil && !errors.Is(err, unix.EPERM) {
					unix.Close(fd)
					return -1, fmt.Errorf("make %s: %w", rel, err)
				}
			}
			return fd, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOENT):
			// Under a default ACL (a granted tree, Grant) the mode's group
			// bits are the new directory's ACL mask: 0775 keeps the
			// agent's grant whole (no umask applies there).
			mode := uint32(0o755)
			if hasDefaultACL(parent) {
				mode = 0o775
			}
			err := unix.Mkdirat(parent, name, mode)
			if err == nil {
				made = true
				err = inheritOwner(parent, name)
			}
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, fmt.Errorf("make %s: %w", rel, err)
			}
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			var st unix.Stat_t
			if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return -1, fmt.Errorf("inspect %s: %w", rel, err)
			}
			aside := fmt.Sprintf(".%s.refused-%d", name, time.Now().UnixNano())
			if len(aside) > 255 {
				aside = fmt.Sprintf(".refused-%d", time.Now().UnixNano())
			}
			if err := unix.Renameat(parent, name, parent, aside); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return -1, fmt.Errorf("move aside %s: %w", rel, err)
			}
			h.report(Incident{Time: time.Now(), Group: group, Path: rel, Found: kind(st.Mode), MovedTo: path.Join(parentRel, aside)})
		default:
			return -1, fmt.Errorf("open %s: %w", rel, err)
		}
	}
	return -1, fmt.Errorf("open %s: it keeps changing", rel)
}

// inheritOwner gives the directory just made at parent/name the owner of
// parent, so a level recreated inside an agent's tree stays writable by the
// agent when the daemon runs as root. The change is made on name itself
// (never through a link put there meanwhile).
func inheritOwner(parent int, name string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(parent, &st); err != nil {
		return err
	}
	if st.Uid == 0 && st.Gid == 0 {
		return nil
	}
	return unix.Fchownat(parent, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	case unix.S_IFDIR:
		return "directory"
	}
	return "special file"
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	return nil
}

func (t *Tree) pathErr(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: op, Path: path.Join(t.rel, name), Err: err}
}

// tmpName is a fresh name for a file being written: hidden, ending in
// ".tmp" (which readers of IPC directories skip), never guessable.
func tmpName(name string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if len(name) > 200 {
		name = name[:200]
	}
	return "." + name + "." + hex.EncodeToString(b[:]) + ".tmp"
}

// isTempOf reports whether entry is a temporary file tmpName(name) made.
func isTempOf(entry, name string) bool {
	if len(name) > 200 {
		name = name[:200]
	}
	mid, ok := strings.CutPrefix(entry, "."+name+".")
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, ".tmp")
	if !ok || len(mid) != 16 {
		return false
	}
	_, err := hex.DecodeString(mid)
	return err == nil
}

// RemoveTemps removes the temporary files an atomic write of rel (Put,
// PutLink, WriteFile) cut off by a crash left beside it. A directory on
// the way that is missing holds none.
func (t *Tree) RemoveTemps(rel string) error {
	dir, name, err := splitRel(rel)
	if err != nil {
		return t.pathErr("remove", rel, err)
	}
	if dir == "" {
		dir = "."
	}
	f, err := t.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return t.pathErr("remove", rel, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return t.pathErr("remove", rel, err)
	}
	for _, n := range names {
		if isTempOf(n, name) {
			if err := t.root.Remove(path.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return t.pathErr("remove", path.Join(dir, n), err)
			}
		}
	}
	return nil
}

// Create creates name exclusively, open for reading and writing (a
// download is read back to be checked and decrypted in place): it fails
// with fs.ErrExist if anything, a dangling symlink included, is there
// already. When the daemon runs as root, the file is given to the owner of
// the tree's directory unless that is root (giveToOwner).
func (t *Tree) Create(name string, perm os.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, t.pathErr("create", name, err)
	}
	f, err := t.root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, t.pathErr("create", name, err)
	}
	if err := t.giveToOwner(f); err != nil {
		f.Close()
		_ = t.root.Remove(name)
		return nil, t.pathErr("create", name, err)
	}
	return f, nil
}

// writeTemp writes data to a new temporary file and syncs it; it returns
// the temporary name.
func (t *Tree) writeTemp(name string, data []byte, perm os.FileMode) (string, error) {
	tmp := tmpName(name)
	f, err := t.Create(tmp, perm)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // the umask may have narrowed it
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = t.root.Remove(tmp)
		return "", t.pathErr("write", name, err)
	}
	return tmp, nil
}

// WriteFile writes data to name atomically: a reader sees the old entry or
// the whole new file. Whatever was at name (a symlink included) is replaced,
// never written through.
func (t *Tree) WriteFile(name string, data []byte, perm os.FileMode) error {
	if err := checkName(name); err != nil {
		return t.pathErr("write", name, err)
	}
	tmp, err := t.writeTemp(name, data, perm)
	if err != nil {
		return err
	}
	if err := t.root.Rename(tmp, name); err != nil {
		_ = t.root.Remove(tmp)
		return t.pathErr("write", name, err)
	}
	return nil
}

// WriteNew writes data to name, complete or not at all, only if nothing is
// at name (not even a dangling symlink). It reports whether it wrote.
func (t *Tree) WriteNew(name string, data []byte, perm os.FileMode) (bool, error) {
	if err := checkName(name); err != nil {
		return false, t.pathErr("write", name, err)
	}
	if _, err := t.root.Lstat(name); err == nil {
		return false, nil
	}
	tmp, err := t.writeTemp(name, data, perm)
	if err != nil {
		return false, err
	}
	defer t.root.Remove(tmp)
	// Link, unlike rename, fails when the target exists.
	if err := t.root.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, t.pathErr("write", name, err)
	}
	return true, nil
}

// ReadFile reads the regular file name, at most limit bytes. Anything else
// (a symlink, fifo, device, directory) is ErrNotRegular and is not opened
// in a way that could block; a larger file is ErrTooLarge.
func (t *Tree) ReadFile(name string, limit int64) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, t.pathErr("read", name, err)
	}
	fi, err := t.root.Lstat(name)
	if err != nil {
		return nil, t.pathErr("read", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, t.pathErr("read", name, fmt.Errorf("%w: a %s", ErrNotRegular, kind(uint32(fileType(fi)))))
	}
	if fi.Size() > limit {
		return nil, t.pathErr("read", name, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrTooLarge, fi.Size(), limit))
	}
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, t.pathErr("read", name, err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, t.pathErr("read", name, err)
	}
	if !os.SameFile(fi, ofi) {
		return nil, t.pathErr("read", name, fmt.Errorf("%w: replaced while opened", ErrNotRegular))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, t.pathErr("read", name, err)
	}
	if int64(len(data)) > limit {
		return nil, t.pathErr("read", name, fmt.Errorf("%w: over the %d-byte limit", ErrTooLarge, limit))
	}
	return data, nil
}

func fileType(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Mode
	}
	return 0
}

// List returns up to limit names of the tree's files, sorted, skipping
// directories, hidden names and *.tmp files. It reads the directory in
// bounded chunks and stops at limit (more is then true), so a directory of
// any size costs bounded memory; with more files than limit, which ones
// are returned follows the directory's order, not the names'.
func (t *Tree) List(limit int) (names []string, more bool, err error) {
	f, err := t.root.Open(".")
	if err != nil {
		return nil, false, t.pathErr("list", ".", err)
	}
	defer f.Close()
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".tmp") {
				continue
			}
			if len(names) == limit {
				more = true
				break
			}
			names = append(names, n)
		}
		if more || errors.Is(err, io.EOF) || len(entries) == 0 {
			break
		}
		if err != nil {
			return nil, false, t.pathErr("list", ".", err)
		}
	}
	slices.Sort(names)
	return names, more, nil
}

// Lstat describes name itself (a symlink is not followed).
func (t *Tree) Lstat(name string) (fs.FileInfo, error) {
	fi, err := t.root.Lstat(name)
	if err != nil {
		return nil, t.pathErr("lstat", name, err)
	}
	return fi, nil
}

// Exists reports whether anything, a dangling symlink included, is at name.
func (t *Tree) Exists(name string) bool {
	_, err := t.root.Lstat(name)
	return err == nil
}

// Remove removes name (a link itself, never its target). A missing name is
// not an error.
func (t *Tree) Remove(name string) error {
	if err := t.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return t.pathErr("remove", name, err)
	}
	return nil
}

// Rename moves oldname to newname, both relative to the tree (they may name
// subdirectories: the root keeps both inside the tree, so a move never
// crosses a file system).
func (t *Tree) Rename(oldname, newname string) error {
	if err := t.root.Rename(oldname, newname); err != nil {
		return t.pathErr("rename", oldname, err)
	}
	return nil
}

// OpenFile opens the regular file at rel, a slash-separated path inside the
// tree, for reading; it is at most limit bytes long when opened. Every
// level above the file must be a real directory and the file a regular
// file: a symlink anywhere on the way, a fifo, a device or a directory is
// ErrNotRegular, nothing is followed and nothing is opened in a way that
// could block. A larger file is ErrTooLarge. The caller reads at most
// limit bytes and closes the file.
func (t *Tree) OpenFile(rel string, limit int64) (*os.File, error) {
	elems := strings.Split(rel, "/")
	for _, e := range elems {
		if err := checkName(e); err != nil {
			return nil, t.pathErr("open", rel, err)
		}
	}
	for i := range elems[:len(elems)-1] {
		dir := path.Join(elems[:i+1]...)
		fi, err := t.root.Lstat(dir)
		if err != nil {
			return nil, t.pathErr("open", rel, err)
		}
		if !fi.IsDir() {
			return nil, t.pathErr("open", rel, fmt.Errorf("%w: %s is a %s", ErrNotRegular, dir, kind(uint32(fileType(fi)))))
		}
	}
	fi, err := t.root.Lstat(rel)
	if err != nil {
		return nil, t.pathErr("open", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, t.pathErr("open", rel, fmt.Errorf("%w: a %s", ErrNotRegular, kind(uint32(fileType(fi)))))
	}
	if fi.Size() > limit {
		return nil, t.pathErr("open", rel, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrTooLarge, fi.Size(), limit))
	}
	f, err := t.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, t.pathErr("open", rel, err)
	}
	ofi, err := f.Stat()
	if err == nil && !os.SameFile(fi, ofi) {
		err = fmt.Errorf("%w: replaced while opened", ErrNotRegular)
	}
	if err != nil {
		f.Close()
		return nil, t.pathErr("open", rel, err)
	}
	return f, nil
}

// Existing opens the directory groups/<folder> (or groups/global) for
// reading, if it is there: it makes nothing and moves nothing aside, so a
// read-only command (an import's dry run) may use it. ok is false when no
// real directory is there (nothing, or a link, file or fifo in its place).
func (h *Home) Existing(folder string) (t *Tree, ok bool, err error) {
	if err := CheckFolder(folder); err != nil && folder != GlobalFolder {
		return nil, false, err
	}
	base := h.layout.GroupsDir()
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", base, &os.PathError{Op: "open", Path: base, Err: err})
	}
	defer unix.Close(fd)
	sub, err := unix.Openat(fd, folder, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("open %s: %w", folder, err)
	}
	rel, _ := filepath.Rel(h.layout.Dir, filepath.Join(base, folder))
	dir := &Tree{h: h, group: folder, path: filepath.Join(base, folder), rel: filepath.ToSlash(rel), fd: sub}
	defer dir.closeFd()
	t, err = dir.descend(nil)
	if err != nil {
		return nil, false, err
	}
	return t, true, nil
}
