package ipc

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultSweep is how often a Watcher looks at every directory even when no
// event arrived: a safety net for bind mounts that drop inotify events, not
// the way new files are normally noticed.
const DefaultSweep = 3 * time.Second

// Watcher reports directories that may hold new files. It wakes on fsnotify
// events at once and, as a safety net, marks every directory on each sweep.
type Watcher struct {
	fs    *fsnotify.Watcher
	sweep time.Duration

	mu      sync.Mutex
	dirs    map[string]bool
	pending map[string]bool
	kick    chan struct{}
}

// NewWatcher creates a watcher that sweeps every sweep (DefaultSweep if zero).
func NewWatcher(sweep time.Duration) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("create watcher: %w", err)
	}
	if sweep <= 0 {
		sweep = DefaultSweep
	}
	return &Watcher{
		fs:      fw,
		sweep:   sweep,
		dirs:    make(map[string]bool),
		pending: make(map[string]bool),
		kick:    make(chan struct{}, 1),
	}, nil
}

// Add watches dir (which must exist) and marks it pending, so files already
// there are reported on the next wake-up.
func (w *Watcher) Add(dir string) error {
	dir = filepath.Clean(dir)
	if err := w.fs.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	w.mu.Lock()
	w.dirs[dir] = true
	w.pending[dir] = true
	w.mu.Unlock()
	w.wake()
	return nil
}

func (w *Watcher) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Close releases a watcher that will not run. Run closes the watcher itself
// when it returns, so Close is only for a watcher Run was never called on.
func (w *Watcher) Close() error {
	return w.fs.Close()
}

// Run calls fn, from this goroutine only, with each directory that may hold
// new files, until ctx ends. Bursts of events for one directory are coalesced
// into one call. Run closes the watcher when it returns.
func (w *Watcher) Run(ctx context.Context, fn func(dir string)) error {
	defer w.fs.Close()
	t := time.NewTicker(w.sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.fs.Events:
			if !ok {
				return nil
			}
			if ev.Op&(fsnotify.Create|fsnotify.Rename|fsnotify.Write) == 0 {
				continue
			}
			w.mu.Lock()
			dir := filepath.Dir(ev.Name)
			if w.dirs[dir] {
				w.pending[dir] = true
			}
			w.mu.Unlock()
		case <-w.fs.Errors:
			// An overflow or a read error means events may be lost: sweep all.
			w.markAll()
		case <-t.C:
			w.markAll()
		case <-w.kick:
		}
		w.drain(fn)
	}
}

func (w *Watcher) markAll() {
	w.mu.Lock()
	for d := range w.dirs {
		w.pending[d] = true
	}
	w.mu.Unlock()
}

func (w *Watcher) drain(fn func(string)) {
	w.mu.Lock()
	dirs := make([]string, 0, len(w.pending))
	for d := range w.pending {
		dirs = append(dirs, d)
	}
	clear(w.pending)
	w.mu.Unlock()
	for _, d := range dirs {
		fn(d)
	}
}
