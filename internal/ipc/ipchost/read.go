package ipchost

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// readRequest reads a request file written by an agent. It reads only a
// regular file, never through a symlink (O_NOFOLLOW) and never blocking on a
// FIFO or device (O_NONBLOCK, then a check of what was opened), and at most
// MaxRequestBytes.
func readRequest(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("read request: %s is a symlink", fi.Name())
		}
		return nil, fmt.Errorf("read request: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read request: %s is not a regular file", fi.Name())
	}
	if fi.Size() > MaxRequestBytes {
		return nil, fmt.Errorf("read request: %s is %d bytes, over the %d-byte limit", fi.Name(), fi.Size(), MaxRequestBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	if len(data) > MaxRequestBytes {
		return nil, fmt.Errorf("read request: %s is over the %d-byte limit", fi.Name(), MaxRequestBytes)
	}
	return data, nil
}
