package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

// A daemon that is neither root nor the user of a rootless engine (a
// `docker` group member on rootful Docker) may not look into a container
// of another uid through /proc/<pid>/root: the kernel allows that only to
// a process that may trace it. Its agents run as a uid per group all the
// same, and their mounts are confirmed from the runner's report instead
// (docs/decisions.md, record 44): the container's first program (the
// agent runner, under the engine's init) writes the device and inode of
// each mount target it is told of (ipc.MountsEnv) as its first stdout
// line, before it reads its input, so nothing the agent controls has run
// in the container when the report is written; no other container can
// write to its stdout. The report is compared with what was checked
// exactly as verifyMounts compares what it finds through /proc, and
// anything but a full, matching report (none within the call timeout, a
// line that is no report, a target missing, reordered or not a mount) is
// a refusal.

// confirmByReport says whether a container running as user has its mounts
// confirmed from its runner's report: when the daemon (euid) is not root,
// the engine is not rootless and user's uid is not the daemon's own (a
// user by name counts as another's).
func confirmByReport(euid int, info EngineInfo, user string) bool {
	if euid == 0 || info.Rootless {
		return false
	}
	u, _, _ := strings.Cut(user, ":")
	n, err := strconv.Atoi(u)
	return err != nil || n != euid
}

// mountsEnv is the environment entry that asks the runner for its report
// of mounts' targets.
func mountsEnv(mounts []Mount) string {
	targets := make([]string, len(mounts))
	for i, m := range mounts {
		targets[i] = m.Target
	}
	b, _ := json.Marshal(targets) // strings only: cannot fail
	return ipc.MountsEnv + "=" + string(b)
}

// checkReport compares the runner's report line with the mounts that were
// checked. An error wraps ErrMountChanged when a target is another file
// than its checked source, or not a mount at all; any other error means
// the mounts could not be confirmed.
func checkReport(line []byte, mounts []Mount) error {
	if line == nil {
		return errors.New("confirm the bind mounts: the container's first output line was too long to be its runner's mount report")
	}
	rep, err := ipc.DecodeMountReport(line)
	if err != nil {
		return fmt.Errorf("confirm the bind mounts: the container's first output line is not its runner's mount report (an agent image whose runner predates it?): %w", err)
	}
	if len(rep.Mounts) != len(mounts) {
		return fmt.Errorf("confirm the bind mounts: the runner reported %d mounts, %d were asked about", len(rep.Mounts), len(mounts))
	}
	for i, m := range mounts {
		s := rep.Mounts[i]
		switch {
		case s.Target != m.Target:
			return fmt.Errorf("confirm the bind mounts: the runner's report names %q where %s was asked about", s.Target, m.Target)
		case s.Err != "":
			return fmt.Errorf("confirm the bind mount at %s: the runner could not look at it: %s", m.Target, s.Err)
		}
		if err := mountMismatch(m, FileID{Dev: s.Dev, Ino: s.Ino}); err != nil {
			return err
		}
		if s.Root != nil && !*s.Root {
			return fmt.Errorf("%w: the container's %s is the checked directory but not the root of a mount (the mount was moved away from it)", ErrMountChanged, m.Target)
		}
	}
	return nil
}

// takeReport hands the container's first stdout line to the run's report
// channel instead of its events, when a report is awaited; nil for a line
// that was too long. It reports whether it took the line.
func (r *dockerRun) takeReport(line []byte) bool {
	if r.report == nil || r.reportTaken {
		return false
	}
	r.reportTaken = true
	r.report <- slices.Clone(line) // buffered: the only send
	return true
}

// confirmReport waits for the runner's report (within the call timeout,
// or until the container's output ends) and compares it with mounts.
func (r *dockerRun) confirmReport(ctx context.Context, mounts []Mount, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line := <-r.report:
		return checkReport(line, mounts)
	case <-r.output:
		select { // a report sent before the output ended comes first
		case line := <-r.report:
			return checkReport(line, mounts)
		default:
		}
		return errors.New("confirm the bind mounts: the container's output ended before its runner reported its mounts")
	case <-t.C:
		return fmt.Errorf("confirm the bind mounts: the runner did not report its mounts within %s (an agent image whose runner predates the report?)", timeout)
	case <-ctx.Done():
		return fmt.Errorf("confirm the bind mounts: %w", ctx.Err())
	}
}
