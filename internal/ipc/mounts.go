package ipc

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// MountsEnv names the container's bind mount targets (a JSON array of
// absolute paths) whose device and inode the runner reports as its first
// stdout line, before it reads its input (docs/decisions.md, record 44).
// A daemon that cannot look into a container of another uid through
// /proc/<pid>/root sets it, and confirms its mounts from the report: the
// runner is then the only program that has run in the container.
const MountsEnv = "BRIDGED_AGENT_MOUNTS"

// MountsType is the type of the report line. It is no Event type:
// DecodeEvent refuses it, so a line of this type written later (by the
// agent's own commands) is never taken for the report.
const MountsType = "mounts"

// maxReportMounts bounds the targets of one report.
const maxReportMounts = 256

// MountStat is one target of a report: its device and inode as the runner
// found them, whether it is the root of a mount (Root; nil where the
// kernel cannot tell), or why it could not be looked at (Err).
type MountStat struct {
	Target string `json:"target"`
	Dev    uint64 `json:"dev,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Root   *bool  `json:"mount_root,omitempty"`
	Err    string `json:"error,omitempty"`
}

// MountReport is the runner's first stdout line when MountsEnv is set.
type MountReport struct {
	Type   string      `json:"type"`
	Mounts []MountStat `json:"mounts"`
}

// ReportMounts looks at each target named by targets (MountsEnv's value)
// without following a final link and writes the report as one line to w.
// A value that is not a JSON array of absolute paths is reported as one
// failed target, which the daemon refuses.
func ReportMounts(w io.Writer, targets string) error {
	var list []string
	rep := MountReport{Type: MountsType}
	if err := json.Unmarshal([]byte(targets), &list); err != nil || len(list) > maxReportMounts {
		rep.Mounts = []MountStat{{Err: fmt.Sprintf("%s is not a JSON array of at most %d paths", MountsEnv, maxReportMounts)}}
	}
	for _, t := range list {
		rep.Mounts = append(rep.Mounts, statMount(t))
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func statMount(target string) MountStat {
	s := MountStat{Target: target}
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, target, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &stx)
	if err == nil {
		s.Dev = unix.Mkdev(stx.Dev_major, stx.Dev_minor)
		s.Ino = stx.Ino
		if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
			root := stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
			s.Root = &root
		}
		return s
	}
	if err != unix.ENOSYS {
		s.Err = err.Error()
		return s
	}
	// No statx (a kernel before 4.11): lstat, without the mount root.
	fi, err := os.Lstat(target)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Dev, s.Ino = uint64(st.Dev), st.Ino
	}
	return s
}

// DecodeMountReport decodes a report line; a line of another type, or one
// that is not a report, is an error.
func DecodeMountReport(line []byte) (MountReport, error) {
	var r MountReport
	if err := json.Unmarshal(line, &r); err != nil {
		return MountReport{}, invalidf("mount report: %v", err)
	}
	if r.Type != MountsType {
		return MountReport{}, invalidf("mount report: the line's type is %q, not %q", clip(r.Type), MountsType)
	}
	if len(r.Mounts) > maxReportMounts {
		return MountReport{}, invalidf("mount report: %d mounts", len(r.Mounts))
	}
	return r, nil
}
