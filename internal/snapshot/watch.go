package snapshot

import (
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// watchMask is what marks a watched directory written: an entry made,
// removed, renamed in or out, written, or its mode, owner or times
// changed; and the directory itself going away. A write in a container
// through a bind mount is the same inode's and is seen the same.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// fullEvery: every directory is listed again at least this often, for
// what no watch sees (a file written through a shared mapping after it
// was closed).
const fullEvery = time.Hour

// watcher is the inotify instance of a Service: every directory of every
// group's trees that a snapshot listed is watched, and what its events
// name is marked written (treeState.dirty) for the group's next snapshot.
// It has no goroutine: the events are read when a snapshot is planned
// (the kernel keeps them meanwhile; when its queue overflows, every tree
// is listed whole once).
type watcher struct {
	mu     sync.Mutex
	fd     int // -1: no inotify; every snapshot lists every directory
	byWD   map[int32]watched
	gen    uint64 // overflows seen
	buf    []byte
	log    zerolog.Logger
	warned bool
}

// watched is the directory a watch descriptor is for.
type watched struct {
	t   *treeState
	rel string
}

func newWatcher(log zerolog.Logger) *watcher {
	w := &watcher{fd: -1, byWD: map[int32]watched{}, log: log}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		log.Warn().Err(err).Msg("snapshots: no inotify instance; every snapshot lists every directory")
		return w
	}
	w.fd, w.buf = fd, make([]byte, 64<<10)
	return w
}

// close drops every watch.
func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	clear(w.byWD)
}

// add watches the directory open as fd, at rel in t. False: it is not
// watched (the watch limit is reached, the watcher is closed).
func (w *watcher) add(t *treeState, rel string, fd int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return false
	}
	// The very directory opened, whatever is at its path now.
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		if !w.warned {
			w.warned = true
			w.log.Warn().Err(err).Msg("snapshots: cannot watch a directory (fs.inotify.max_user_watches?); it is listed at every snapshot")
		}
		return false
	}
	w.byWD[int32(wd)] = watched{t, rel}
	return true
}

// plan is what one snapshot of t lists: every directory, or those written
// since the last (and their ancestors entered). It reads the events
// queued and takes t's marks: a snapshot that fails must reset t.
func (w *watcher) plan(t *treeState, now time.Time) (full bool, dirty map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain()
	full = t.full || w.fd < 0 || t.gen != w.gen || t.partial || t.root == "" || now.Sub(t.lastFull) > fullEvery
	dirty = t.dirty
	t.dirty, t.full, t.gen = map[string]bool{}, false, w.gen
	if full {
		t.lastFull = now
	}
	return full, dirty
}

// relist marks dirs to be listed at t's next snapshot.
func (w *watcher) relist(t *treeState, dirs []string) {
	if len(dirs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range dirs {
		if d == "." {
			d = ""
		}
		t.dirty[d] = true
	}
}

// drain reads the events queued. w.mu held.
func (w *watcher) drain() {
	if w.fd < 0 {
		return
	}
	for {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			if err != nil && !errors.Is(err, unix.EAGAIN) {
				// Events may be lost: no tree's watch is trusted.
				w.gen++
				w.log.Warn().Err(err).Msg("snapshots: cannot read inotify events; listing every directory")
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(w.buf[off:]))
			mask := binary.NativeEndian.Uint32(w.buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
			off += unix.SizeofInotifyEvent + nameLen
			if mask&unix.IN_Q_OVERFLOW != 0 {
				w.gen++
				continue
			}
			d, ok := w.byWD[wd]
			if !ok {
				continue
			}
			d.t.dirty[d.rel] = true
			if mask&unix.IN_IGNORED != 0 {
				delete(w.byWD, wd)
			}
			if d.rel == "" && mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_UNMOUNT) != 0 {
				d.t.full = true // the top itself went: another may be there
			}
		}
	}
}
