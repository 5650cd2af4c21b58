package ipchost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// watchMask is what a requests directory is watched for: a file appearing
// there (created, renamed in, or finished writing), and the directory itself
// going away (deleted or renamed by the agent). IN_DONT_FOLLOW and
// IN_ONLYDIR make a symlink at the directory's place fail to be watched
// instead of watching wherever it points.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// dirWatcher is one inotify instance for the requests directories of every
// group. It does no file handling: an event only wakes the group's worker,
// which opens its tree through the home package and looks for itself. Watches
// are keyed by their descriptor, never by path, so what one group's agent
// does to its directory cannot touch another group's watch.
type dirWatcher struct {
	f  *os.File // the inotify descriptor, read through the runtime poller
	fd int

	mu     sync.Mutex
	closed bool
	byWD   map[int32]*group

	done chan struct{} // closed when run returns
}

func newDirWatcher() (*dirWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("create inotify instance: %w", err)
	}
	return &dirWatcher{
		f:    os.NewFile(uintptr(fd), "inotify"),
		fd:   fd,
		byWD: make(map[int32]*group),
		done: make(chan struct{}),
	}, nil
}

// add watches the directory at path for g and returns the watch descriptor.
// path must be the directory the worker just opened through the home package;
// a symlink put there since is refused by the kernel (IN_DONT_FOLLOW,
// IN_ONLYDIR), and another real directory could only be one inside the same
// group's own tree (the agent cannot reach any other), so the worst an agent
// can do by racing is make its own requests wait for the sweep.
func (w *dirWatcher) add(path string, g *group) (int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return -1, errors.New("watcher closed")
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, watchMask)
	if err != nil {
		return -1, fmt.Errorf("watch %s: %w", path, err)
	}
	if other := w.byWD[int32(wd)]; other != nil && other != g {
		// The same directory as another group's: never theirs to lose.
		return -1, fmt.Errorf("watch %s: the directory is group %s's", path, other.folder)
	}
	w.byWD[int32(wd)] = g
	return int32(wd), nil
}

// remove drops g's watch wd, if it is still g's.
func (w *dirWatcher) remove(wd int32, g *group) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.byWD[wd] != g {
		return
	}
	delete(w.byWD, wd)
	_, _ = unix.InotifyRmWatch(w.fd, uint32(wd)) // gone already if the directory was
}

// run reads events until the watcher is closed, calling wake for the group
// an event belongs to and all when the kernel's queue overflowed (events were
// lost). Neither may block.
func (w *dirWatcher) run(wake func(*group), all func()) error {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil
			}
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			return fmt.Errorf("read inotify events: %w", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			off += unix.SizeofInotifyEvent + nameLen
			if mask&unix.IN_Q_OVERFLOW != 0 {
				all()
				continue
			}
			w.mu.Lock()
			g := w.byWD[wd]
			if g != nil && mask&unix.IN_IGNORED != 0 {
				delete(w.byWD, wd) // the kernel dropped the watch
			}
			w.mu.Unlock()
			if g == nil {
				continue
			}
			if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
				g.watchLost.Store(true)
			}
			wake(g)
		}
	}
}

// close stops run and drops every watch.
func (w *dirWatcher) close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	clear(w.byWD)
	w.mu.Unlock()
	return w.f.Close()
}
