// Package testlog holds a log sink tests read while goroutines write to it.
// It is imported by tests only.
package testlog

import (
	"bytes"
	"context"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers: a
// logger's or a child process's output that a test reads while it is
// written, or waits on without polling. The zero value is ready to use.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed by the next write; nil while nobody waits
}

// Write appends p and wakes every WaitFor.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitFor returns nil once cond holds for everything written so far,
// checking it now and after every write, or ctx's error if ctx ends first.
// cond runs on the calling goroutine without the buffer's lock.
func (b *Buffer) WaitFor(ctx context.Context, cond func(written string) bool) error {
	for {
		b.mu.Lock()
		written := b.buf.String()
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		if cond(written) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
