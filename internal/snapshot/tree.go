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

// racyWindow: a file changed this close to its hashing may change again
// within the same clock tick without its stamp changing, so its hash is
// not cached.
const racyWindow = 2 * time.Second

// scan is one snapshot of one tree in progress.
type scan struct {
	b          *batch
	maxFile    int64
	maxEntries int
	include    func(rel string, dir bool) bool // nil: everything
	prev       map[string]cached               // the cache of the previous snapshot
	next       map[string]cached
	// prevDirs and nextDirs are each directory's entries and tree hash:
	// a directory whose entries are the same as last time is not written
	// or hashed again.
	prevDirs, nextDirs map[string]dirCache
	now                time.Time
	// counts
	entries  int
	hashed   int   // files whose content was read
	written  int64 // bytes of new objects
	large    []string
	skipped  []string
	partial  bool
	building []*dirBuild
}

// dirCache is a directory's entries as last recorded, and its tree's hash.
type dirCache struct {
	entries []entry
	hash    string
}

type dirBuild struct {
	rel     string
	perm    uint32
	entries []entry
}

// run scans t and returns the hash of its root tree.
func (s *scan) run(t *home.Tree) (string, error) {
	s.next = make(map[string]cached, len(s.prev))
	s.nextDirs = make(map[string]dirCache, len(s.prevDirs))
	s.building = []*dirBuild{{rel: ""}}
	err := t.Scan(func(e home.ScanEntry, open func() (*os.File, error)) error {
		if e.Truncated {
			s.partial = true
			return nil
		}
		if s.include != nil && !s.include(e.Path, e.IsDir()) {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err := s.closeTo(path.Dir(e.Path)); err != nil {
			return err
		}
		s.entries++
		if s.maxEntries > 0 && s.entries > s.maxEntries {
			s.partial = true
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		name := path.Base(e.Path)
		perm := e.Mode & 0o7777
		top := s.building[len(s.building)-1]
		switch {
		case e.IsDir() && e.Deep:
			top.entries = append(top.entries, entry{Type: typeSkipped, Perm: perm, Name: name, Kind: "too deep"})
			s.skipped = append(s.skipped, e.Path)
		case e.IsDir():
			s.building = append(s.building, &dirBuild{rel: e.Path, perm: perm})
		case e.IsLink():
			h, n, err := s.b.put([]byte(e.Target))
			if err != nil {
				return err
			}
			s.written += n
			top.entries = append(top.entries, entry{Type: typeLink, Perm: perm, Size: int64(len(e.Target)), Hash: h, Name: name})
		case e.IsRegular():
			en, err := s.file(e, open)
			if err != nil {
				return err
			}
			en.Name, en.Perm = name, perm
			top.entries = append(top.entries, en)
		default:
			top.entries = append(top.entries, entry{Type: typeSpecial, Perm: perm, Name: name, Kind: e.Kind()})
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if err := s.closeTo(""); err != nil {
		return "", err
	}
	return s.finish(s.building[0])
}

// closeTo finishes the directories being built below dir ("." or "" is
// the top).
func (s *scan) closeTo(dir string) error {
	if dir == "." {
		dir = ""
	}
	for len(s.building) > 1 && s.building[len(s.building)-1].rel != dir {
		d := s.building[len(s.building)-1]
		s.building = s.building[:len(s.building)-1]
		h, err := s.finish(d)
		if err != nil {
			return err
		}
		parent := s.building[len(s.building)-1]
		parent.entries = append(parent.entries, entry{Type: typeDir, Perm: d.perm, Hash: h, Name: path.Base(d.rel)})
	}
	return nil
}

// finish stores d's tree object and returns its hash.
func (s *scan) finish(d *dirBuild) (string, error) {
	if c, ok := s.prevDirs[d.rel]; ok && slices.Equal(c.entries, d.entries) {
		s.nextDirs[d.rel] = c
		return c.hash, nil
	}
	var b strings.Builder
	for _, e := range d.entries {
		b.WriteString(e.line())
	}
	h, n, err := s.b.put([]byte(b.String()))
	s.written += n
	if err == nil {
		s.nextDirs[d.rel] = dirCache{entries: d.entries, hash: h}
	}
	return h, err
}

// file records a regular file: its content's hash from the cache when its
// stamp did not change, else read (and stored when not over maxFile).
func (s *scan) file(e home.ScanEntry, open func() (*os.File, error)) (entry, error) {
	st := stampOf(e)
	large := s.maxFile >= 0 && e.Size > s.maxFile
	if c, ok := s.prev[e.Path]; ok && c.st == st && c.large == large {
		s.next[e.Path] = c
		return fileEntry(c.hash, e.Size, large), nil
	}
	f, err := open()
	if err != nil {
		s.skipped = append(s.skipped, e.Path)
		return entry{Type: typeSkipped, Size: e.Size, Kind: "unreadable"}, nil
	}
	defer f.Close()
	s.hashed++
	hs := sha256.New()
	if _, err := io.Copy(hs, io.LimitReader(f, e.Size)); err != nil {
		s.skipped = append(s.skipped, e.Path)
		return entry{Type: typeSkipped, Size: e.Size, Kind: "unreadable"}, nil
	}
	h := hex.EncodeToString(hs.Sum(nil))
	if large {
		s.large = append(s.large, e.Path)
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
		s.next[e.Path] = cached{st: st, hash: h, large: large}
	}
	return fileEntry(h, e.Size, large), nil
}

func fileEntry(h string, size int64, large bool) entry {
	if large {
		return entry{Type: typeLarge, Size: size, Hash: h}
	}
	return entry{Type: typeFile, Size: size, Hash: h}
}
