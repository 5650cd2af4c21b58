package dirwatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// watchMask is what a directory is watched for: a file appearing
// there (created, renamed in, or finished writing), and the directory itself
// going away (deleted or renamed by the agent). IN_DONT_FOLLOW and
// IN_ONLYDIR make a symlink at the directory's place fail to be watched
// instead of watching wherever it points.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// watcher is one inotify instance for every directory of an Engine. It does
// no file handling: an event only wakes the directory's worker, which opens
// the directory through Config.Open and looks for itself. Watches are keyed
// by their descriptor, never by path, so what is done to one directory
// cannot touch another directory's watch.
type watcher[D Dir] struct {
	f  *os.File // the inotify descriptor, read through the runtime poller
	fd int

	mu     sync.Mutex
	closed bool
	byWD   map[int32]*dir[D]

	done chan struct{} // closed when run returns
}

func newWatcher[D Dir]() (*watcher[D], error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("create inotify instance: %w", err)
	}
	return &watcher[D]{
		f:    os.NewFile(uintptr(fd), "inotify"),
		fd:   fd,
		byWD: make(map[int32]*dir[D]),
		done: make(chan struct{}),
	}, nil
}

// add watches the directory at path for d and returns the watch descriptor.
// path must be the directory the worker just opened; a symlink put there
// since is refused by the kernel (IN_DONT_FOLLOW, IN_ONLYDIR), so whoever
// races the worker can at most have another real directory watched, which
// delays d's files until the sweep; a directory watched for another key is
// refused, so it can never take that key's watch.
func (w *watcher[D]) add(path string, d *dir[D]) (int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return -1, errors.New("watcher closed")
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, watchMask)
	if err != nil {
		return -1, fmt.Errorf("watch %s: %w", path, err)
	}
	if other := w.byWD[int32(wd)]; other != nil && other != d {
		// The same directory as another key's: never theirs to lose.
		return -1, fmt.Errorf("watch %s: the directory is %s's", path, other.key)
	}
	w.byWD[int32(wd)] = d
	return int32(wd), nil
}

// remove drops d's watch wd, if it is still d's.
func (w *watcher[D]) remove(wd int32, d *dir[D]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.byWD[wd] != d {
		return
	}
	delete(w.byWD, wd)
	_, _ = unix.InotifyRmWatch(w.fd, uint32(wd)) // gone already if the directory was
}

// run reads events until the watcher is closed, calling wake for the
// directory an event belongs to and all when the kernel's queue overflowed
// (events were lost). Neither may block.
func (w *watcher[D]) run(wake func(*dir[D]), all func()) error {
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
			d := w.byWD[wd]
			if d != nil && mask&unix.IN_IGNORED != 0 {
				delete(w.byWD, wd) // the kernel dropped the watch
			}
			w.mu.Unlock()
			if d == nil {
				continue
			}
			if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
				d.watchLost.Store(true)
			}
			wake(d)
		}
	}
}

// close stops run and drops every watch.
func (w *watcher[D]) close() error {
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
