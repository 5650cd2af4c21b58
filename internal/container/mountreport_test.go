package container

// The runner's mount report (docs/decisions.md, record 44): what a daemon
// that may not look through /proc/<pid>/root takes as its container's
// mounts, and everything it refuses.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

func TestConfirmByReportOnlyWhereProcIsClosed(t *testing.T) {
	rootful, rootless := EngineInfo{Engine: EngineDocker}, EngineInfo{Engine: EnginePodman, Rootless: true}
	for _, tt := range []struct {
		name string
		euid int
		info EngineInfo
		user string
		want bool
	}{
		{"root daemon", 0, rootful, "61001:61001", false},
		{"rootless engine's user", 1000, rootless, "61001:61001", false},
		{"docker group member, agent as itself", 1000, rootful, "1000:1000", false},
		{"docker group member, a group's uid", 1000, rootful, "61001:61001", true},
		{"docker group member, a user by name", 1000, rootful, "agent", true},
	} {
		if got := confirmByReport(tt.euid, tt.info, tt.user); got != tt.want {
			t.Errorf("%s: confirmByReport = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestCheckReport(t *testing.T) {
	mounts := []Mount{
		{Source: "/home/b/groups/fam", Target: ContainerGroupDir, ID: FileID{Dev: 2049, Ino: 11}},
		{Source: "/home/b/ipc/fam", Target: ContainerIPCDir, ID: FileID{Dev: 2049, Ino: 12}},
	}
	yes, no := `"mount_root":true`, `"mount_root":false`
	stat := func(target string, ino int, more string) string {
		s := `{"target":"` + target + `","dev":2049,"ino":` + strconv.Itoa(ino)
		if more != "" {
			s += "," + more
		}
		return s + "}"
	}
	report := func(stats ...string) []byte {
		return []byte(`{"type":"mounts","mounts":[` + strings.Join(stats, ",") + `]}`)
	}
	for _, tt := range []struct {
		name    string
		line    []byte
		changed bool   // the error wraps ErrMountChanged
		want    string // "" for no error
	}{
		{"as checked", report(stat(ContainerGroupDir, 11, yes), stat(ContainerIPCDir, 12, yes)), false, ""},
		{"as checked, a kernel that cannot tell a mount root", report(stat(ContainerGroupDir, 11, ""), stat(ContainerIPCDir, 12, "")), false, ""},
		{"another directory", report(stat(ContainerGroupDir, 99, yes), stat(ContainerIPCDir, 12, yes)), true, "/workspace/group is device 2049 inode 99"},
		{"the checked directory moved under the target, the mount away", report(stat(ContainerGroupDir, 11, no), stat(ContainerIPCDir, 12, yes)), true, "not the root of a mount"},
		{"a target left out", report(stat(ContainerGroupDir, 11, yes)), false, "reported 1 mounts, 2 were asked about"},
		{"a target added", report(stat(ContainerGroupDir, 11, yes), stat(ContainerIPCDir, 12, yes), stat("/etc", 12, yes)), false, "reported 3 mounts"},
		{"targets reordered", report(stat(ContainerIPCDir, 12, yes), stat(ContainerGroupDir, 11, yes)), false, "names \"/workspace/ipc\" where /workspace/group"},
		{"a target the runner could not look at", report(stat(ContainerGroupDir, 11, yes), `{"target":"/workspace/ipc","error":"permission denied"}`), false, "could not look at it: permission denied"},
		{"an event first (an image whose runner predates the report)", []byte(`{"type":"session","session_id":"s"}`), false, "not its runner's mount report"},
		{"not JSON", []byte("hello"), false, "not its runner's mount report"},
		{"a blank line", []byte{}, false, "not its runner's mount report"},
		{"a line too long", nil, false, "too long"},
	} {
		err := checkReport(tt.line, mounts)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v; want the mounts confirmed", tt.name, err)
		case tt.want == "":
		case err == nil:
			t.Errorf("%s: confirmed; want refused (%q)", tt.name, tt.want)
		case errors.Is(err, ErrMountChanged) != tt.changed || !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: %v (ErrMountChanged: %v); want %q (ErrMountChanged: %v)", tt.name, err, errors.Is(err, ErrMountChanged), tt.want, tt.changed)
		}
	}
}

// The report is the first stdout line only: that line goes to the report,
// never to the events, and a later line of the report's type (the agent's
// own, written once its commands run) is no event either.
func TestReportIsTheFirstLineOnly(t *testing.T) {
	r := &dockerRun{log: zerolog.Nop(), events: make(chan ipc.Event, 4), exited: make(chan struct{}), output: make(chan struct{}), report: make(chan []byte, 1)}
	first := []byte(`{"type":"mounts","mounts":[]}`)
	r.stdoutLine(first)
	r.stdoutLine([]byte(`{"type":"mounts","mounts":[{"target":"/workspace/group","dev":1,"ino":1}]}`))
	r.stdoutLine([]byte(`{"type":"session","session_id":"s"}`))
	if got := <-r.report; string(got) != string(first) {
		t.Errorf("report %q; want the first line %q", got, first)
	}
	if len(r.events) != 1 {
		t.Fatalf("%d events; want the session only", len(r.events))
	}
	if ev := <-r.events; ev.Type != ipc.EventSession {
		t.Errorf("event %+v; want the session", ev)
	}
}

// No report within the deadline, or output that ends without one, is a
// refusal.
func TestConfirmReportFailsClosed(t *testing.T) {
	mounts := []Mount{{Target: ContainerGroupDir, ID: FileID{Dev: 1, Ino: 1}}}
	r := &dockerRun{output: make(chan struct{}), report: make(chan []byte, 1)}
	err := r.confirmReport(context.Background(), mounts, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not report its mounts within") {
		t.Errorf("no report: %v; want refused, naming the deadline", err)
	}
	close(r.output)
	if err := r.confirmReport(context.Background(), mounts, time.Minute); err == nil || !strings.Contains(err.Error(), "ended before its runner reported") {
		t.Errorf("output ended: %v; want refused", err)
	}
	r.report <- []byte(`{"type":"mounts","mounts":[{"target":"/workspace/group","dev":1,"ino":1,"mount_root":true}]}`)
	if err := r.confirmReport(context.Background(), mounts, time.Minute); err != nil {
		t.Errorf("a report sent before the output ended: %v; want it taken", err)
	}
}
