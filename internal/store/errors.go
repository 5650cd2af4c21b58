package store

import (
	"errors"
	"strings"
	"syscall"

	sqlite3 "modernc.org/sqlite/lib"
)

// ErrDiskFull is the class of a write the disk holding the database had no
// room for, checked with errors.Is. Tx (and so every typed write made in
// one) sets it on the error it returns; the error's text does not change.
var ErrDiskFull = errors.New("database or disk is full")

// diskFull marks err as ErrDiskFull without changing its text.
type diskFull struct{ error }

func (e diskFull) Unwrap() error { return e.error }

func (diskFull) Is(target error) bool { return target == ErrDiskFull }

// classify maps a write's error to the store's error classes: a full disk
// (SQLite's SQLITE_FULL, in any extended form, or the ENOSPC an OS write
// reports) becomes ErrDiskFull. Any other error is returned as is.
//
// SQLite's text for SQLITE_FULL is also accepted, for an error that carries
// no code of its own: a trigger's RAISE, or a driver error turned into text.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrDiskFull) {
		return err
	}
	var coded interface{ Code() int }
	full := errors.As(err, &coded) && coded.Code()&0xff == sqlite3.SQLITE_FULL
	full = full || errors.Is(err, syscall.ENOSPC) ||
		strings.Contains(strings.ToLower(err.Error()), ErrDiskFull.Error())
	if full {
		return diskFull{err}
	}
	return err
}
