package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bridged-app/bridged/internal/ipc"
)

// The runner lowers its own open-file limit to what ipc.EnvNoFile says, on
// an engine that dropped the container's ulimit too: checked in a child
// process (this test binary again), whose limit the test reads back.
func TestLimitNoFile(t *testing.T) {
	if n := os.Getenv("BRIDGED_TEST_NOFILE_CHILD"); n != "" {
		if err := limitNoFile(n); err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(0)
		}
		var lim unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
		os.Stdout.WriteString(strconv.FormatUint(lim.Cur, 10) + " " + strconv.FormatUint(lim.Max, 10))
		os.Exit(0)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	child := func(n string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLimitNoFile$")
		cmd.Env = append(os.Environ(), "BRIDGED_TEST_NOFILE_CHILD="+n)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		return string(out)
	}
	if lim.Max > 300 {
		if got := child("300"); got != "300 300" {
			t.Errorf("limit after %s=300: %q; want soft and hard 300", ipc.EnvNoFile, got)
		}
	}
	// Never raised: a higher value leaves the limit as it is.
	want := strconv.FormatUint(lim.Cur, 10) + " " + strconv.FormatUint(lim.Max, 10)
	if got := child(strconv.FormatUint(lim.Max+1, 10)); got != want && lim.Max < 1<<62 {
		t.Errorf("limit after a higher value: %q; want it unchanged (%s)", got, want)
	}
	if got := child("lots"); !strings.HasPrefix(got, "error: ") {
		t.Errorf("limit after %s=lots: %q; want an error", ipc.EnvNoFile, got)
	}
}
