package home

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pruneChunk is how many directory entries a prune reads at a time, so a
// directory of any size costs bounded memory.
const pruneChunk = 256

// PruneRunLogs removes the run logs (data/logs/<folder>/run-*.log) last
// written before `before`, of every folder, and returns how many went.
// data/logs is the daemon's own: it is walked by path.
func (h *Home) PruneRunLogs(before time.Time) (int, error) {
	dir := filepath.Join(h.layout.DataDir(), "logs")
	folders, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune run logs: %w", err)
	}
	n := 0
	for _, f := range folders {
		if !f.IsDir() {
			continue
		}
		sub := filepath.Join(dir, f.Name())
		m, err := pruneDir(sub, before, func(e fs.DirEntry) bool {
			return e.Type().IsRegular() && strings.HasPrefix(e.Name(), "run-") && strings.HasSuffix(e.Name(), ".log")
		}, func(name string) error { return os.Remove(filepath.Join(sub, name)) })
		n += m
		if err != nil {
			return n, fmt.Errorf("prune run logs of %s: %w", f.Name(), err)
		}
	}
	return n, nil
}

// PruneLocalFiles removes the files delivered to local chats
// (data/local/<message id>/) before `before`, and returns how many
// messages' files went. data/local is the daemon's own.
func (h *Home) PruneLocalFiles(before time.Time) (int, error) {
	dir := h.layout.LocalFilesDir()
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	n, err := pruneDir(dir, before, func(e fs.DirEntry) bool { return e.IsDir() },
		func(name string) error { return os.RemoveAll(filepath.Join(dir, name)) })
	if err != nil {
		return n, fmt.Errorf("prune local files: %w", err)
	}
	return n, nil
}

// PruneInboxes removes the files in every group's inbox/ (the media the
// chat sent, saved there by the daemon) last changed before `before`, and
// returns how many went. Only regular files directly in inbox/ go: what
// the agent made there (directories, links) is left alone. Each workspace
// is opened as a Tree, so nothing the agent planted is followed, and a
// workspace without an inbox/ is not given one.
func (h *Home) PruneInboxes(before time.Time) (int, error) {
	dir := h.layout.GroupsDir()
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune inboxes: %w", err)
	}
	var folders []string
	for {
		entries, err := d.ReadDir(pruneChunk)
		for _, e := range entries {
			if e.IsDir() && CheckFolder(e.Name()) == nil {
				folders = append(folders, e.Name())
			}
		}
		if err != nil || len(entries) == 0 {
			break
		}
	}
	d.Close()
	n := 0
	for _, folder := range folders {
		m, err := h.pruneInbox(folder, before)
		n += m
		if err != nil {
			return n, fmt.Errorf("prune the inbox of %s: %w", folder, err)
		}
	}
	return n, nil
}

func (h *Home) pruneInbox(folder string, before time.Time) (int, error) {
	group, err := h.Group(folder)
	if err != nil {
		return 0, err
	}
	defer group.Close()
	if fi, err := group.Lstat("inbox"); err != nil || !fi.IsDir() {
		return 0, nil // none (or not a directory: the media writer deals with that)
	}
	inbox, err := group.Dir("inbox")
	if err != nil {
		return 0, err
	}
	defer inbox.Close()
	return pruneEntries(inbox.root.FS(), before, func(e fs.DirEntry) bool { return e.Type().IsRegular() }, inbox.Remove)
}

// pruneDir is pruneEntries over the daemon-owned directory dir.
func pruneDir(dir string, before time.Time, want func(fs.DirEntry) bool, remove func(name string) error) (int, error) {
	return pruneEntries(os.DirFS(dir), before, want, remove)
}

// pruneEntries removes, with remove, the entries of the directory fsys that
// want accepts and whose modification time is before `before`, reading the
// directory pruneChunk entries at a time. It returns how many went.
func pruneEntries(fsys fs.FS, before time.Time, want func(fs.DirEntry) bool, remove func(name string) error) (int, error) {
	f, err := fsys.Open(".")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rd, ok := f.(fs.ReadDirFile)
	if !ok {
		return 0, errors.New("not a directory")
	}
	n := 0
	for {
		entries, err := rd.ReadDir(pruneChunk)
		for _, e := range entries {
			if !want(e) {
				continue
			}
			info, err := e.Info()
			if err != nil || !info.ModTime().Before(before) {
				continue // gone meanwhile, or recent
			}
			if err := remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, err
			}
			n++
		}
		if errors.Is(err, io.EOF) || len(entries) == 0 {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
