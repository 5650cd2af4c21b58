package ipctest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Exit is a process a test waits to end that is not its child (a child of
// a process it started, say), so there is no Wait to block on and /proc
// raises no file system events: a pidfd, readable once the process has
// exited, is the event instead.
type Exit struct {
	fd int // -1: the process was gone when it was opened
}

// OpenExit opens pid for WaitExit. Open it while the process is known to
// run (before the signal that ends it): a pid reused after the process is
// reaped is then never mistaken for it. A pid already gone is an Exit that
// has happened.
func OpenExit(pid int) (*Exit, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return &Exit{fd: -1}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return &Exit{fd: fd}, nil
}

// Wait returns nil once the process has exited (a zombie counts: it runs
// no more), or ctx's error once its deadline passes (a ctx without one
// waits for the exit).
func (e *Exit) Wait(ctx context.Context) error {
	if e.fd < 0 {
		return nil
	}
	for {
		ms := -1
		if d, ok := ctx.Deadline(); ok {
			ms = int(max(time.Until(d), 0).Milliseconds())
		}
		fds := []unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("poll pidfd: %w", err)
		case n > 0:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
}

// Close releases the pidfd.
func (e *Exit) Close() {
	if e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
	}
}
