package snapshot

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// objects is the content-addressed object store under
// data/snapshots/objects/: each object (a file's content, a symlink's
// target, a tree, an undo's plan) lives once, at <first two hex digits>/
// <the rest> of its sha256. Objects are written in batches (one per
// snapshot): each to a temporary file, and when the batch is committed
// they are synced, renamed into place and their directories synced. So an
// object that exists is whole and durable, whatever a kill cut off.
type objects struct {
	dir string
}

// newObjects returns the store at dir; nothing is made on disk before
// the first write.
func newObjects(dir string) *objects { return &objects{dir: dir} }

func (o *objects) path(h string) string { return filepath.Join(o.dir, h[:2], h[2:]) }

// has reports whether object h is stored.
func (o *objects) has(h string) bool {
	_, err := os.Lstat(o.path(h))
	return err == nil
}

// get reads object h.
func (o *objects) get(h string) ([]byte, error) {
	if !validHash(h) {
		return nil, fmt.Errorf("snapshot store: bad object name %q", h)
	}
	data, err := os.ReadFile(o.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("snapshot store: object %s is missing", h[:12])
	}
	return data, err
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// batch is the objects one snapshot writes: in temporary files until
// commit. Not safe for concurrent use.
type batch struct {
	o       *objects
	pending map[string]string // hash → temporary file
}

func (o *objects) batch() *batch { return &batch{o: o, pending: map[string]string{}} }

// has reports whether object h is stored or written by this batch.
func (b *batch) has(h string) bool {
	if _, ok := b.pending[h]; ok {
		return true
	}
	return b.o.has(h)
}

// put writes data, returns its hash and how many bytes were written (0:
// it was there already).
func (b *batch) put(data []byte) (string, int64, error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if b.has(h) {
		return h, 0, nil
	}
	tmp, err := b.o.temp()
	if err != nil {
		return "", 0, err
	}
	_, err = tmp.Write(data)
	return b.keep(tmp, h, int64(len(data)), err)
}

// putFrom writes what r yields and returns its hash and the bytes written
// (0: it was there).
func (b *batch) putFrom(r io.Reader) (string, int64, error) {
	tmp, err := b.o.temp()
	if err != nil {
		return "", 0, err
	}
	hs := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, hs), r)
	h := hex.EncodeToString(hs.Sum(nil))
	if err == nil && b.has(h) {
		tmp.Close()
		os.Remove(tmp.Name())
		return h, 0, nil
	}
	return b.keep(tmp, h, n, err)
}

func (o *objects) temp() (*os.File, error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	if err := os.MkdirAll(filepath.Join(o.dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(o.dir, "tmp", hex.EncodeToString(r[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	return f, nil
}

// keep closes tmp (written with err) as the batch's object h.
func (b *batch) keep(tmp *os.File, h string, n int64, err error) (string, int64, error) {
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", 0, fmt.Errorf("snapshot store: write object: %w", err)
	}
	b.pending[h] = tmp.Name()
	return h, n, nil
}

// syncAllAbove is how many objects a batch syncs with one syncfs of the
// store's file system instead of one fsync each.
const syncAllAbove = 32

// commit makes the batch's objects durable and puts them in place: synced
// (one by one, or the whole file system at once for a large batch),
// renamed, their directories synced. A batch committed may be used again.
func (b *batch) commit() error {
	if len(b.pending) == 0 {
		return nil
	}
	if len(b.pending) > syncAllAbove {
		if err := syncFS(b.o.dir); err != nil {
			return err
		}
	} else {
		for _, tmp := range b.pending {
			if err := syncFile(tmp); err != nil {
				return err
			}
		}
	}
	dirs := map[string]bool{}
	for h, tmp := range b.pending {
		if err := os.MkdirAll(filepath.Join(b.o.dir, h[:2]), 0o700); err != nil {
			return fmt.Errorf("snapshot store: %w", err)
		}
		if err := os.Rename(tmp, b.o.path(h)); err != nil {
			return fmt.Errorf("snapshot store: %w", err)
		}
		dirs[h[:2]] = true
	}
	for d := range dirs {
		if err := syncFile(filepath.Join(b.o.dir, d)); err != nil {
			return err
		}
	}
	clear(b.pending)
	return syncFile(b.o.dir)
}

// abort removes the batch's temporary files.
func (b *batch) abort() {
	for _, tmp := range b.pending {
		os.Remove(tmp)
	}
	clear(b.pending)
}

func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("snapshot store: sync %s: %w", p, err)
	}
	return nil
}

// syncFS syncs the whole file system dir is on.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("snapshot store: syncfs: %w", err)
	}
	return nil
}
