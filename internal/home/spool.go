package home

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// spoolMeta is the description kept beside a spooled file.
const spoolMeta = "meta.json"

// Spooled is a file kept in the spool (Layout.SpoolDir) for an outgoing
// message: a copy the daemon owns, taken out of the agent's workspace
// before the message was committed, so what is sent is what the agent
// named then, whatever it does to its workspace later.
type Spooled struct {
	Path string `json:"-"`    // the copy, absolute
	Name string `json:"name"` // the file name shown to the recipient
	MIME string `json:"mime"`
	Kind string `json:"kind"` // image, audio or document
	Size int64  `json:"size"`
}

// Spool is the spool directory: one subdirectory per outgoing message,
// named by its key, holding the copy (under its shown name) and meta.json.
// It is daemon-owned, so its paths are used directly. Safe for concurrent
// use.
type Spool struct{ dir string }

// Spool returns the home's spool.
func (h *Home) Spool() Spool { return Spool{dir: h.layout.SpoolDir()} }

// Uploads returns the spool of files attached to posted messages
// (Layout.UploadsDir): the same layout as the outbox's spool, keyed by the
// upload's own key (UploadKey), never pruned by Spool.Prune's id rule; the
// media worker removes an upload once it is in the group's inbox/.
func (h *Home) Uploads() Spool { return Spool{dir: h.layout.UploadsDir()} }

// UploadKey is a fresh key for an upload.
func UploadKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "up-" + hex.EncodeToString(b[:])
}

// SpoolKey is the spool key of outbox row id, whose channel id is ext.
func SpoolKey(id int64, ext string) string { return strconv.FormatInt(id, 10) + "-" + ext }

// Staged is a copy written to the spool but not yet kept under a key.
type Staged struct {
	dir  string
	file Spooled
}

// File describes the staged copy.
func (s *Staged) File() Spooled { return s.file }

// Stage copies r (at most limit bytes, else ErrTooLarge) into a fresh
// staging directory of the spool as name, synced, with its description.
// Keep the result with Staged.Keep or drop it with Staged.Discard.
func (sp Spool) Stage(name, mime, kind string, r io.Reader, limit int64) (*Staged, error) {
	name = safeName(name)
	if err := os.MkdirAll(sp.dir, 0o700); err != nil {
		return nil, fmt.Errorf("stage %s: %w", name, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(sp.dir, ".stage-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("stage %s: %w", name, err)
	}
	s := &Staged{dir: dir, file: Spooled{Name: name, MIME: mime, Kind: kind}}
	if err := s.write(r, limit); err != nil {
		s.Discard()
		return nil, fmt.Errorf("stage %s: %w", name, err)
	}
	return s, nil
}

func (s *Staged) write(r io.Reader, limit int64) error {
	f, err := os.OpenFile(filepath.Join(s.dir, s.file.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%w: over the %d-byte limit", ErrTooLarge, limit)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	s.file.Size = n
	meta, err := json.Marshal(s.file)
	if err != nil {
		return err
	}
	mf, err := os.OpenFile(filepath.Join(s.dir, spoolMeta), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = mf.Write(meta)
	if err == nil {
		err = mf.Sync()
	}
	if cerr := mf.Close(); err == nil {
		err = cerr
	}
	return err
}

// Keep moves the staged copy under key, where Spool.Get finds it, and
// syncs the spool directory.
func (s *Staged) Keep(key string) error {
	if err := checkName(key); err != nil || strings.HasPrefix(key, ".") {
		return fmt.Errorf("keep spooled %s: %w: %q", s.file.Name, ErrBadName, key)
	}
	parent := filepath.Dir(s.dir)
	if err := os.Rename(s.dir, filepath.Join(parent, key)); err != nil {
		return fmt.Errorf("keep spooled %s: %w", s.file.Name, err)
	}
	s.dir = filepath.Join(parent, key)
	if d, err := os.Open(parent); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Discard removes the staged copy (or a kept one). It is safe to call
// twice.
func (s *Staged) Discard() {
	_ = os.RemoveAll(s.dir)
}

// Get returns the file spooled under key; ok is false when there is none.
func (sp Spool) Get(key string) (f Spooled, ok bool, err error) {
	if err := checkName(key); err != nil || strings.HasPrefix(key, ".") {
		return Spooled{}, false, fmt.Errorf("get spooled %q: %w", key, ErrBadName)
	}
	dir := filepath.Join(sp.dir, key)
	data, err := os.ReadFile(filepath.Join(dir, spoolMeta))
	if errors.Is(err, fs.ErrNotExist) {
		return Spooled{}, false, nil
	}
	if err != nil {
		return Spooled{}, false, fmt.Errorf("get spooled %s: %w", key, err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return Spooled{}, false, fmt.Errorf("get spooled %s: %w", key, err)
	}
	f.Name = safeName(f.Name)
	f.Path = filepath.Join(dir, f.Name)
	return f, true, nil
}

// Remove deletes what is spooled under key, if anything.
func (sp Spool) Remove(key string) error {
	if err := checkName(key); err != nil || strings.HasPrefix(key, ".") {
		return fmt.Errorf("remove spooled %q: %w", key, ErrBadName)
	}
	if err := os.RemoveAll(filepath.Join(sp.dir, key)); err != nil {
		return fmt.Errorf("remove spooled %s: %w", key, err)
	}
	return nil
}

// safeName is name as a plain, visible file name that is not the
// description's: path separators and control characters become "_", a
// leading dot is dropped, and an empty name becomes "file".
func safeName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, name)
	name = strings.TrimLeft(name, ".")
	if len(name) > 200 {
		name = name[len(name)-200:]
	}
	if name == "" || name == spoolMeta {
		name = "file"
	}
	return name
}

// stageLeftover is how old a staging directory must be to count as left
// behind by a crash (a copy is staged for at most a request's time).
const stageLeftover = time.Hour

// Prune removes what the spool no longer needs: the copies kept before
// `before` whose outbox row is not pending any more (done reports whether
// row id was sent, failed or deleted; an error leaves the copy), and staging
// directories a crash left behind. It returns how many entries went.
func (sp Spool) Prune(before time.Time, done func(id int64) (bool, error)) (int, error) {
	return sp.sweep("prune spool", before, func(key string) (bool, error) {
		idText, _, ok := strings.Cut(key, "-")
		id, err := strconv.ParseInt(idText, 10, 64)
		if !ok || err != nil {
			return false, nil
		}
		return done(id)
	})
}

// PruneUploads removes what an uploads spool (Home.Uploads) no longer
// needs: uploads kept before `before` that keep does not claim (their
// message was never committed, or their media settled while the daemon
// could not remove them), and staging directories a crash left behind. It
// returns how many entries went.
func (sp Spool) PruneUploads(before time.Time, keep func(key string) bool) (int, error) {
	return sp.sweep("prune uploads", before, func(key string) (bool, error) { return !keep(key), nil })
}

// sweep removes the staging directories older than stageLeftover and the
// entries kept before `before` that gone reports gone (an error stops the
// sweep); it returns how many went.
func (sp Spool) sweep(what string, before time.Time, gone func(key string) (bool, error)) (int, error) {
	entries, err := os.ReadDir(sp.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".stage-"):
			if !info.ModTime().Before(time.Now().Add(-stageLeftover)) {
				continue
			}
		case !info.ModTime().Before(before):
			continue
		default:
			g, err := gone(name)
			if err != nil {
				return n, fmt.Errorf("%s: %w", what, err)
			}
			if !g {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(sp.dir, name)); err != nil {
			return n, fmt.Errorf("%s: %w", what, err)
		}
		n++
	}
	return n, nil
}
