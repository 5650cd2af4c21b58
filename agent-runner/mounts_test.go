package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Asked for a mount report (docs/decisions.md, record 44), the runner
// writes it as its first stdout line while its input is still unread: the
// daemon takes it before anything the agent controls has run. Each target
// is looked at as it is (a final link not followed); one it cannot look at
// says why.
func TestMountReportBeforeInput(t *testing.T) {
	dir := t.TempDir()
	link := dir + "/link"
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	targets, _ := json.Marshal([]string{dir, link, dir + "/missing"})
	cmd := exec.Command(bin.runner)
	cmd.Env = append(os.Environ(), ipc.MountsEnv+"="+string(targets), "BRIDGED_AGENT_CLAUDE="+bin.claude)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Bytes()
		}
		close(lines)
	}()
	var line []byte
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("no stdout line within 30s while the input was unread; want the mount report first")
	}
	rep, err := ipc.DecodeMountReport(line)
	if err != nil {
		t.Fatalf("first stdout line %q: %v; want the mount report", line, err)
	}
	if len(rep.Mounts) != 3 {
		t.Fatalf("report %+v; want the three targets", rep)
	}
	want := func(path string) (uint64, uint64) {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return uint64(st.Dev), st.Ino
	}
	for i, path := range []string{dir, link} {
		s := rep.Mounts[i]
		dev, ino := want(path)
		if s.Target != path || s.Dev != dev || s.Ino != ino || s.Err != "" {
			t.Errorf("report of %s: %+v; want device %d inode %d", path, s, dev, ino)
		}
		if s.Root != nil && *s.Root {
			t.Errorf("report of %s: a mount root; want not (a plain directory, a link)", path)
		}
	}
	if s := rep.Mounts[2]; s.Err == "" || s.Ino != 0 {
		t.Errorf("report of a missing target: %+v; want the error", s)
	}
}
