//go:build !linux

package ipctest

import (
	"context"
	"errors"
)

// Exit is a process a test waits to end; only Linux has the pidfd it needs.
type Exit struct{}

// OpenExit fails off Linux.
func OpenExit(pid int) (*Exit, error) { return nil, errors.ErrUnsupported }

// Wait fails off Linux.
func (e *Exit) Wait(ctx context.Context) error { return errors.ErrUnsupported }

// Close does nothing.
func (e *Exit) Close() {}
