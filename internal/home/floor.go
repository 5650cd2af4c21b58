package home

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrLowDisk is wrapped by Floor.Check's error when the disk under the
// home has less free space than the floor.
var ErrLowDisk = errors.New("the disk is almost full")

// Floor is the free space the disk under the home keeps: below it the
// daemon takes in no more files (outgoing files are not staged, media are
// not downloaded). The zero Floor lets everything in.
type Floor struct {
	Dir string // a directory on the watched disk (the home)
	Min uint64 // free bytes the disk keeps; 0: no floor
	// Free reports the free bytes (for an unprivileged user) of the disk
	// holding a path; nil: statfs.
	Free func(path string) (uint64, error)
}

// Check returns an error wrapping ErrLowDisk, with the free space and the
// floor in its text, when the disk has less than Min bytes free. A disk
// whose free space cannot be read passes: the floor only keeps a nearly
// full disk from filling up, and a failing statfs is the owner alert's to
// report.
func (f Floor) Check() error {
	if f.Min == 0 || f.Dir == "" {
		return nil
	}
	free := f.Free
	if free == nil {
		free = FreeBytes
	}
	n, err := free(f.Dir)
	if err != nil || n >= f.Min {
		return nil
	}
	return fmt.Errorf("%w: %s free, below the %s the host keeps free", ErrLowDisk, ByteSize(int64(n)), ByteSize(int64(f.Min)))
}

// FreeBytes reports the bytes an unprivileged user may still write on the
// disk holding path.
func FreeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// ByteSize is a byte count for people: "512 B", "12.3 KiB", "4.0 MiB",
// "1.5 GiB".
func ByteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
