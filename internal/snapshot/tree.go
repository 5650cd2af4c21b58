package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/home"
	"golang.org/x/sys/unix"
)

// Entry types in a tree object.
const (
	typeDir     = 'd' // Hash: the subtree
	typeFile    = 'f' // Hash: the content, stored
	typeLarge   = 'h' // a file over the size limit: Hash of the content, not stored
	typeLink    = 'l' // Hash: the target (stored), never followed
	typeSpecial = 's' // a fifo, socket or device: its kind only
	typeSkipped = '!' // could not be read (vanished, unreadable, too deep): no hash
)

// entry is one line of a tree object: type, permission bits, size, hash
// (or "-") and the quoted name.
type entry struct {
	Type byte
	Perm uint32
	Size int64
	Hash string
	Name string
	// Kind is a special file's kind or why an entry was skipped (not
	// stored in the tree's hash for specials: the kind is).
	Kind string
}

func (e entry) line() string {
	h := e.Hash
	if h == "" {
		h = "-"
	}
	k := ""
	if e.Kind != "" {
		k = " " + strconv.Quote(e.Kind)
	}
	return fmt.Sprintf("%c %o %d %s %s%s\n", e.Type, e.Perm, e.Size, h, strconv.Quote(e.Name), k)
}

func parseTree(data []byte) ([]entry, error) {
	var out []entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.SplitN(line, " ", 5)
		if len(f) != 5 || len(f[0]) != 1 {
			return nil, fmt.Errorf("snapshot store: bad tree line %q", line)
		}
		perm, err1 := strconv.ParseUint(f[1], 8, 32)
		size, err2 := strconv.ParseInt(f[2], 10, 64)
		name, rest, err3 := unquotePrefix(f[4])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("snapshot store: bad tree line %q: %w", line, err)
		}
		e := entry{Type: f[0][0], Perm: uint32(perm), Size: size, Name: name}
		if f[3] != "-" {
			e.Hash = f[3]
		}
		if rest = strings.TrimPrefix(rest, " "); rest != "" {
			var err error
			if e.Kind, err = strconv.Unquote(rest); err != nil {
				return nil, fmt.Errorf("snapshot store: bad tree line %q: %w", line, err)
			}
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// unquotePrefix reads the quoted string s starts with and returns it and
// what follows.
func unquotePrefix(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	u, err := strconv.Unquote(q)
	return u, s[len(q):], err
}

// stamp is what a file looked like when its content was hashed: if all of
// it is the same at the next snapshot, the content is taken to be too.
// ctime changes with every write and no agent can set it.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

func stampOf(e home.ScanEntry) stamp {
	return stamp{dev: e.Dev, ino: e.Ino, size: e.Size, mtime: e.Mtime, ctime: e.Ctime}
}

// cached is a file's hash as of its stamp.
type cached struct {
	st    stamp
	hash  string
	large bool
}

// HashLimit: a file larger than this is not even hashed; its size and
// modification time are recorded.
const HashLimit = 1 << 30

// racyWindow: a file changed this close to its hashing may change again
// within the same clock tick without its stamp changing, so its hash is
// not cached.
const racyWindow = 2 * time.Second

// treeState is what a group's snapshots of one of its trees (its folder
// or its memory) keep between them: each directory's entries and tree as
// last recorded, each file's hash as of its stamp, and what the watch
// found since (watcher). Only the directories written since the last
// snapshot are listed again; the others are their trees of last time.
type treeState struct {
	files map[string]cached   // by path
	dirs  map[string]dirCache // by path, "" the top
	root  string              // the top's tree at the last snapshot; "" none
	// large and skipped are the paths recorded by size and hash only and
	// those that could not be read, as of the last snapshot.
	large, skipped map[string]bool
	partial        bool
	// Under watcher.mu: the directories written since the last snapshot,
	// and whether the next must list every directory (the watch cannot be
	// trusted: it lost events, a directory could not be watched, …).
	dirty    map[string]bool
	full     bool
	gen      uint64    // the watcher's overflow count when last planned
	lastFull time.Time // when every directory was last listed
}

func newTreeState() *treeState {
	return &treeState{files: map[string]cached{}, dirs: map[string]dirCache{}, large: map[string]bool{}, skipped: map[string]bool{},
		dirty: map[string]bool{}, full: true}
}

// reset forgets everything recorded of the tree: the next snapshot lists
// and reads it all. watcher.mu need not be held for the caches (they are
// the group's); the flag is set under it.
func (t *treeState) reset(w *watcher) {
	t.files, t.dirs, t.root = map[string]cached{}, map[string]dirCache{}, ""
	t.large, t.skipped, t.partial = map[string]bool{}, map[string]bool{}, false
	w.mu.Lock()
	t.full = true
	w.mu.Unlock()
}

// dirCache is a directory's entries as last recorded, its tree's hash,
// which directory it was (device and inode) and how many entries its
// subtree holds.
type dirCache struct {
	entries  []entry
	hash     string
	dev, ino uint64
	count    int
}

// scan is one snapshot of one tree in progress.
type scan struct {
	b          *batch
	w          *watcher
	t          *treeState
	maxFile    int64
	maxEntries int
	include    func(rel string, dir bool) bool // nil: everything
	now        time.Time
	// full lists every directory; else only those in dirty, and the
	// directories on their way (touched: dirty and their ancestors) are
	// entered.
	full           bool
	dirty, touched map[string]bool
	// relist are directories to list at the next snapshot whatever the
	// watch says (one not watched, one holding an unreadable entry or a
	// file with more than one link).
	relist []string
	// counts
	entries int
	listed  int   // directories listed
	hashed  int   // files whose content was read
	written int64 // bytes of new objects
}

// unreadable reports whether err is one the agent can cause in its own tree (a
// directory it closed to the daemon): the entry is recorded as unreadable.
func unreadable(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}

// run scans the tree open as tr and returns the hash of its top's tree.
func (s *scan) run(tr *home.Tree) (string, error) {
	s.touched = map[string]bool{}
	for d := range s.dirty {
		for p := d; ; p = path.Dir(p) {
			if p == "." {
				p = ""
			}
			s.touched[p] = true
			if p == "" {
				break
			}
		}
	}
	d, err := tr.OpenScan()
	if err != nil {
		return "", err
	}
	defer d.Close()
	h, _, err := s.dir(d, "", s.full)
	if err != nil {
		return "", err
	}
	s.t.root = h
	return h, nil
}

// dir records the directory open as d at rel and returns its tree's hash
// and how many entries its subtree holds. Listed when full, when the watch
// saw it written or when it is not the directory recorded there; else its
// entries of last time, with the subdirectories the watch saw written
// below it recorded again.
func (s *scan) dir(d *home.ScanDir, rel string, full bool) (string, int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.Fd(), &st); err != nil {
		return "", 0, err
	}
	c, cached := s.t.dirs[rel]
	if !cached || c.dev != st.Dev || c.ino != st.Ino {
		full = true
	}
	if !full && !s.dirty[rel] {
		if !s.touched[rel] {
			s.entries += c.count
			return c.hash, c.count, nil
		}
		s.entries += len(c.entries)
		return s.subdirs(d, rel, slices.Clone(c.entries), false, st)
	}
	s.watch(d, rel)
	s.listed++
	var es []entry
	err := d.Entries(func(e home.ScanEntry, open func() (*os.File, error)) error {
		if e.Truncated {
			s.partial()
			return nil
		}
		if s.include != nil && !s.include(e.Path, e.IsDir()) {
			return nil
		}
		s.entries++
		if s.maxEntries > 0 && s.entries > s.maxEntries {
			s.partial()
			return nil
		}
		name := path.Base(e.Path)
		perm := e.Mode & 0o7777
		switch {
		case e.IsDir() && e.Deep:
			es = append(es, entry{Type: typeSkipped, Perm: perm, Name: name, Kind: "too deep"})
			s.t.skipped[e.Path] = true
		case e.IsDir():
			// Its hash once entered (subdirs); Size carries nothing.
			es = append(es, entry{Type: typeDir, Perm: perm, Name: name, Hash: dirPending(e)})
		case e.IsLink():
			h, n, err := s.b.put([]byte(e.Target))
			if err != nil {
				return err
			}
			s.written += n
			es = append(es, entry{Type: typeLink, Perm: perm, Size: int64(len(e.Target)), Hash: h, Name: name})
		case e.IsRegular():
			if e.Nlink > 1 {
				// A write through another link is not seen here.
				s.relist = append(s.relist, rel)
			}
			en, err := s.file(e, open)
			if err != nil {
				return err
			}
			en.Name, en.Perm = name, perm
			es = append(es, en)
		default:
			es = append(es, entry{Type: typeSpecial, Perm: perm, Name: name, Kind: e.Kind()})
		}
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	if cached {
		s.forgetGone(rel, c.entries, es)
	}
	return s.subdirs(d, rel, es, full, st)
}

// dirPending marks a directory entry not entered yet, with the device and
// inode the listing saw.
func dirPending(e home.ScanEntry) string {
	return "?" + strconv.FormatUint(e.Dev, 10) + ":" + strconv.FormatUint(e.Ino, 10)
}

// subdirs records the subdirectories of the directory at rel (es, its
// entries) that need it and then its tree. A subdirectory listed just now
// (its hash pending) that is the one recorded last time and holds nothing
// the watch saw written is its tree of last time without being opened.
func (s *scan) subdirs(d *home.ScanDir, rel string, es []entry, full bool, st unix.Stat_t) (string, int, error) {
	count := len(es)
	out := es[:0]
	for _, e := range es {
		if e.Type != typeDir {
			out = append(out, e)
			continue
		}
		p := path.Join(rel, e.Name)
		c, cached := s.t.dirs[p]
		pending := strings.HasPrefix(e.Hash, "?")
		if cached && !full && !s.touched[p] && (!pending || e.Hash == "?"+strconv.FormatUint(c.dev, 10)+":"+strconv.FormatUint(c.ino, 10)) {
			e.Hash = c.hash
			count += c.count
			s.entries += c.count
			out = append(out, e)
			continue
		}
		sub, err := d.Sub(e.Name)
		if err == nil {
			var h string
			var n int
			h, n, err = s.dir(sub, p, full)
			sub.Close()
			if err == nil {
				e.Hash = h
				count += n
				out = append(out, e)
				continue
			}
		}
		switch {
		case errors.Is(err, home.ErrVanished):
			// Gone since the listing: the agent is changing its tree.
			s.forget(p, true)
			count--
			s.relist = append(s.relist, rel)
		case unreadable(err):
			s.forget(p, true)
			s.t.skipped[p] = true
			s.relist = append(s.relist, rel)
			out = append(out, entry{Type: typeSkipped, Perm: e.Perm, Name: e.Name, Kind: "unreadable"})
		default:
			return "", 0, err
		}
	}
	return s.finish(rel, out, count, st)
}

// partial marks the snapshot partial (more entries than it records): the
// next one lists every directory again.
func (s *scan) partial() { s.t.partial = true }

// forgetGone forgets the entries of a directory at rel recorded last time
// (was) that its listing now (is) does not hold as they were: a name gone,
// a directory that is no longer one.
func (s *scan) forgetGone(rel string, was, is []entry) {
	i := 0
	for _, w := range was {
		for i < len(is) && is[i].Name < w.Name {
			i++
		}
		p := path.Join(rel, w.Name)
		if i < len(is) && is[i].Name == w.Name && (w.Type == typeDir) == (is[i].Type == typeDir) {
			if w.Type == typeSkipped && is[i].Type != typeSkipped {
				delete(s.t.skipped, p)
			}
			continue
		}
		s.forget(p, w.Type == typeDir)
	}
}

// forget drops what is recorded of the path p (and, for a directory,
// below it).
func (s *scan) forget(p string, dir bool) {
	t := s.t
	delete(t.files, p)
	delete(t.large, p)
	delete(t.skipped, p)
	if !dir {
		return
	}
	delete(t.dirs, p)
	prefix := p + "/"
	for k := range t.dirs {
		if strings.HasPrefix(k, prefix) {
			delete(t.dirs, k)
		}
	}
	for _, m := range []map[string]bool{t.large, t.skipped} {
		for k := range m {
			if strings.HasPrefix(k, prefix) {
				delete(m, k)
			}
		}
	}
	for k := range t.files {
		if strings.HasPrefix(k, prefix) {
			delete(t.files, k)
		}
	}
}

// watch has the watcher watch the directory open as d (before it is
// listed: nothing written after the listing is missed); one it cannot
// watch is listed at every snapshot.
func (s *scan) watch(d *home.ScanDir, rel string) {
	if !s.w.add(s.t, rel, d.Fd()) {
		s.relist = append(s.relist, rel)
	}
}

// finish stores the tree of the directory at rel (st its stat) and
// returns its hash and how many entries its subtree holds.
func (s *scan) finish(rel string, es []entry, count int, st unix.Stat_t) (string, int, error) {
	if c, ok := s.t.dirs[rel]; ok && slices.Equal(c.entries, es) {
		c.dev, c.ino, c.count = st.Dev, st.Ino, count
		s.t.dirs[rel] = c
		return c.hash, count, nil
	}
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.line())
	}
	h, n, err := s.b.put([]byte(b.String()))
	s.written += n
	if err != nil {
		return "", 0, err
	}
	s.t.dirs[rel] = dirCache{entries: es, hash: h, dev: st.Dev, ino: st.Ino, count: count}
	return h, count, nil
}

// file records a regular file: its content's hash from the cache when its
// stamp did not change, else read (and stored when not over maxFile).
func (s *scan) file(e home.ScanEntry, open func() (*os.File, error)) (entry, error) {
	if e.Size > HashLimit {
		// Reading it at every change would let an agent stall every
		// snapshot (a sparse file of a terabyte is made at once): its
		// size and modification time stand for its content.
		delete(s.t.files, e.Path)
		s.t.large[e.Path] = true
		return entry{Type: typeLarge, Size: e.Size,
			Kind: "not hashed, modified " + time.Unix(0, e.Mtime).UTC().Format(time.RFC3339Nano)}, nil
	}
	st := stampOf(e)
	large := s.maxFile >= 0 && e.Size > s.maxFile
	delete(s.t.large, e.Path)
	delete(s.t.skipped, e.Path)
	if c, ok := s.t.files[e.Path]; ok && c.st == st && c.large == large {
		if large {
			s.t.large[e.Path] = true
		}
		return fileEntry(c.hash, e.Size, large), nil
	}
	delete(s.t.files, e.Path)
	f, err := open()
	if err != nil {
		s.t.skipped[e.Path] = true
		s.relist = append(s.relist, path.Dir(e.Path))
		return entry{Type: typeSkipped, Size: e.Size, Kind: "unreadable"}, nil
	}
	defer f.Close()
	s.hashed++
	hs := sha256.New()
	if _, err := io.Copy(hs, io.LimitReader(f, e.Size)); err != nil {
		s.t.skipped[e.Path] = true
		s.relist = append(s.relist, path.Dir(e.Path))
		return entry{Type: typeSkipped, Size: e.Size, Kind: "unreadable"}, nil
	}
	h := hex.EncodeToString(hs.Sum(nil))
	if large {
		s.t.large[e.Path] = true
	} else if !s.b.has(h) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return entry{}, err
		}
		var n int64
		// What is stored is hashed as it is written: a file the agent
		// changed meanwhile is recorded as it was stored.
		h, n, err = s.b.putFrom(io.LimitReader(f, e.Size))
		if err != nil {
			return entry{}, err
		}
		s.written += n
	}
	if s.now.Sub(time.Unix(0, max(e.Mtime, e.Ctime))) > racyWindow {
		s.t.files[e.Path] = cached{st: st, hash: h, large: large}
	}
	return fileEntry(h, e.Size, large), nil
}

func fileEntry(h string, size int64, large bool) entry {
	if large {
		return entry{Type: typeLarge, Size: size, Hash: h}
	}
	return entry{Type: typeFile, Size: size, Hash: h}
}
