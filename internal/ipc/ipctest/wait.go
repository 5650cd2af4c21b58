// Package ipctest helps tests wait for what appears in IPC directories without
// polling. It is imported by tests only.
package ipctest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// WaitFor returns once cond holds, checking it after the watch on dir is in
// place (so a change made before the call is not missed) and again after
// every change in dir: a file created, written, renamed or removed. While dir
// does not exist its nearest existing ancestor is watched instead, so dir's
// creation wakes the wait. cond runs on the calling goroutine. WaitFor
// returns ctx's error if ctx ends before cond holds.
func WaitFor(ctx context.Context, dir string, cond func() bool) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("create watcher: %w", err)
	}
	defer fw.Close()
	dir = filepath.Clean(dir)
	watched := ""
	for {
		if watched != dir {
			w, err := watchNearest(fw, dir)
			if err != nil {
				return err
			}
			if watched != "" && watched != w {
				_ = fw.Remove(watched) // may already be gone with its directory
			}
			watched = w
		}
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait in %s: %w", dir, ctx.Err())
		case ev, ok := <-fw.Events:
			if !ok {
				return fmt.Errorf("wait in %s: watcher closed", dir)
			}
			if ev.Name == watched && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watched = "" // the watch went with the directory
			}
		case _, ok := <-fw.Errors:
			if !ok {
				return fmt.Errorf("wait in %s: watcher closed", dir)
			}
			// An overflow may have lost events: check cond again.
		}
	}
}

// watchNearest watches dir or, while it is missing, its nearest existing
// ancestor, and returns the directory it watches.
func watchNearest(fw *fsnotify.Watcher, dir string) (string, error) {
	for {
		d := dir
		for {
			err := fw.Add(d)
			if err == nil {
				break
			}
			parent := filepath.Dir(d)
			if !errors.Is(err, fs.ErrNotExist) || parent == d {
				return "", fmt.Errorf("watch %s: %w", d, err)
			}
			d = parent
		}
		if d == dir {
			return d, nil
		}
		// The level below d may have been created between the failed and
		// the successful Add, with no event to tell: look, and start over
		// if it is there now.
		rel, err := filepath.Rel(d, dir)
		if err != nil {
			return "", fmt.Errorf("watch %s: %w", dir, err)
		}
		next := filepath.Join(d, firstElem(rel))
		if _, err := os.Stat(next); errors.Is(err, fs.ErrNotExist) {
			return d, nil
		}
		_ = fw.Remove(d)
	}
}

// firstElem returns the first element of a relative path.
func firstElem(rel string) string {
	for i := 0; i < len(rel); i++ {
		if os.IsPathSeparator(rel[i]) {
			return rel[:i]
		}
	}
	return rel
}
