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
	"sync"
)

// objects is the content-addressed object store under data/snapshots/:
// each object (a file's content, a symlink's target, a tree) lives once,
// at objects/<first two hex digits>/<the rest> of its sha256. An object is
// written to a temporary file, synced and renamed into place, so one that
// exists is whole; sync makes the directories of the objects written
// since the last sync durable, which a change's row waits for.
type objects struct {
	dir string
	mu  sync.Mutex
	// dirty are the fan-out directories that got an entry since sync.
	dirty map[string]struct{}
}

// newObjects returns the store at dir; nothing is made on disk before
// the first write.
func newObjects(dir string) *objects {
	return &objects{dir: dir, dirty: map[string]struct{}{}}
}

func (o *objects) path(h string) string { return filepath.Join(o.dir, h[:2], h[2:]) }

// has reports whether object h is stored.
func (o *objects) has(h string) bool {
	_, err := os.Lstat(o.path(h))
	return err == nil
}

// put stores data, returns its hash and how many bytes were written (0:
// it was there already).
func (o *objects) put(data []byte) (string, int64, error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if o.has(h) {
		return h, 0, nil
	}
	tmp, err := o.temp()
	if err != nil {
		return "", 0, err
	}
	_, err = tmp.Write(data)
	return o.commit(tmp, h, int64(len(data)), err)
}

// putFrom stores what r yields (at most limit bytes were checked by the
// caller) and returns its hash and the bytes written (0: it was there).
func (o *objects) putFrom(r io.Reader) (string, int64, error) {
	tmp, err := o.temp()
	if err != nil {
		return "", 0, err
	}
	hs := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, hs), r)
	h := hex.EncodeToString(hs.Sum(nil))
	if err == nil && o.has(h) {
		tmp.Close()
		os.Remove(tmp.Name())
		return h, 0, nil
	}
	return o.commit(tmp, h, n, err)
}

func (o *objects) temp() (*os.File, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if err := os.MkdirAll(filepath.Join(o.dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(o.dir, "tmp", hex.EncodeToString(b[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	return f, nil
}

// commit syncs tmp (written with err) and renames it to object h.
func (o *objects) commit(tmp *os.File, h string, n int64, err error) (string, int64, error) {
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.MkdirAll(filepath.Join(o.dir, h[:2]), 0o700)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), o.path(h))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", 0, fmt.Errorf("snapshot store: write object: %w", err)
	}
	o.mu.Lock()
	o.dirty[h[:2]] = struct{}{}
	o.mu.Unlock()
	return h, n, nil
}

// sync makes the renames of the objects written so far durable.
func (o *objects) sync() error {
	o.mu.Lock()
	dirs := o.dirty
	o.dirty = map[string]struct{}{}
	o.mu.Unlock()
	for d := range dirs {
		if err := syncDir(filepath.Join(o.dir, d)); err != nil {
			return err
		}
	}
	if len(dirs) > 0 {
		return syncDir(o.dir)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("snapshot store: sync %s: %w", dir, err)
	}
	return nil
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
