package ipc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Directory and file names inside an IPC namespace.
const (
	InputDir     = "input"
	RequestsDir  = "requests"
	ResponsesDir = "responses"
	CloseName    = "_close"
	tmpSuffix    = ".tmp"
)

var nameSeq atomic.Uint64

// NewName returns a file-name stem that sorts after every stem this process
// made before, and after stems made earlier by other processes on a clock that
// does not go backwards: a zero-padded nanosecond timestamp, a per-process
// sequence number and a random suffix.
func NewName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%019d-%06d-%s", time.Now().UnixNano(), nameSeq.Add(1)%1000000, hex.EncodeToString(b[:]))
}

// WriteFileAtomic writes data to dir/name so that a reader sees either no file
// or the whole file: it writes dir/name.tmp, syncs it, and renames it into
// place. The directory is created if missing.
func WriteFileAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	final := filepath.Join(dir, name)
	tmp := final + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", name, err)
	}
	return nil
}

// WriteJSON marshals v and writes it atomically to dir/name.
func WriteJSON(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return WriteFileAtomic(dir, name, data)
}

// List returns the names of the regular files in dir in creation order (their
// names sort that way), skipping *.tmp files and hidden files. A missing
// directory is empty, not an error.
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasSuffix(n, tmpSuffix) || strings.HasPrefix(n, ".") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Layout names the directories of one group's IPC namespace.
type Layout struct{ Root string }

func (l Layout) Input() string     { return filepath.Join(l.Root, InputDir) }
func (l Layout) Requests() string  { return filepath.Join(l.Root, RequestsDir) }
func (l Layout) Responses() string { return filepath.Join(l.Root, ResponsesDir) }

// Ensure creates the namespace's directories.
func (l Layout) Ensure() error {
	for _, d := range []string{l.Input(), l.Requests(), l.Responses()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}
