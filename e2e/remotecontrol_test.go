package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/testimage"
)

var remoteLinkRE = regexp.MustCompile(`^Remote control: (https://claude\.ai/code\?bridge=env_[0-9a-f]{24})\n`)

// hostFakeCLI builds the fake claude for this machine and returns its path.
func hostFakeCLI(t *testing.T) string {
	t.Helper()
	root, err := testimage.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "claude")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/fakeclaude")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the fake claude: %v\n%s", err, out)
	}
	return bin
}

// processesOf returns the pids of the running processes of the program at
// path.
func processesOf(t *testing.T, path string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", en.Name(), "exe")); err == nil && exe == path {
			if st, err := os.ReadFile(filepath.Join("/proc", en.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z ") {
				continue // a zombie is gone but for its parent's wait
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// remoteReply posts text to the main chat as the owner and returns
// bridged's answer.
func (e *env) remoteReply(text string) string {
	e.t.Helper()
	from := lastID(e, "local:main")
	e.post("local:main", text)
	return e.waitOut("local:main", from, 1, time.Minute)[0].Text
}

// /remote-control: off by default, refused with how to turn it on; on, the
// owner's command starts one host-level claude remote-control session (the
// CLI given no credential, in bridged's own directory) and gets its link
// back; a member's is refused; a second command gets the same link; stop
// ends it, so does its own end, and so does bridged's.
func TestE2ERemoteControl(t *testing.T) {
	parallel(t, light)
	e := newEnv(t)
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	fake := hostFakeCLI(t)
	t.Cleanup(func() { // none is left on this machine, whatever failed
		for _, pid := range processesOf(t, fake) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	d := e.start()
	if got := e.remoteReply("/remote-control"); !strings.Contains(got, "Remote control is off") || !strings.Contains(got, "BRIDGED_REMOTE_CONTROL=true") {
		t.Fatalf("off: got %q; want it refused with how to turn it on", got)
	}
	from := lastID(e, "local:main")
	if out, errs, code, _ := e.chatM("main", "/remote-control"); code != 0 || !strings.Contains(errs, "Taken by bridged as a /remote-control command") {
		t.Errorf("chat -m /remote-control: exit %d, stdout %q, stderr %q; want it told taken as a command", code, out, errs)
	}
	if got := e.waitOut("local:main", from, 1, time.Minute)[0].Text; !strings.Contains(got, "Remote control is off") {
		t.Fatalf("off, from chat -m: got %q; want it refused", got)
	}
	for _, m := range e.messages("local:main", 0, 0) {
		if m.Direction == "in" {
			t.Fatalf("the command was stored as a message for the agent: %+v", m)
		}
	}
	d.stop(t)

	e.extraEnv = append(e.extraEnv, "BRIDGED_REMOTE_CONTROL=true", "BRIDGED_REMOTE_CONTROL_CLI="+fake)
	d = e.start()
	got := e.remoteReply("/remote-control")
	g := remoteLinkRE.FindStringSubmatch(got)
	if g == nil {
		t.Fatalf("on: got %q; want the session's link", got)
	}
	link := g[1]
	pids := processesOf(t, fake)
	if len(pids) != 1 {
		t.Fatalf("remote control CLIs running: %v; want one", pids)
	}
	proc := filepath.Join("/proc", strconv.Itoa(pids[0]))
	if cwd, err := os.Readlink(filepath.Join(proc, "cwd")); err != nil || cwd != filepath.Join(e.home, "data", "remote-control") {
		t.Errorf("the CLI runs in %q (%v); want bridged's data/remote-control", cwd, err)
	}
	if environ, err := os.ReadFile(filepath.Join(proc, "environ")); err != nil || strings.Contains(string(environ), secret) || strings.Contains(string(environ), "ANTHROPIC_") {
		t.Errorf("the CLI's environment (%v) holds bridged's Claude credential or endpoint", err)
	}

	// A member of the main chat is refused, and nothing changes.
	from = lastID(e, "local:main")
	if err := e.api("POST", "/v1/chats/local:main/messages", map[string]string{"as": "bob", "text": "/remote-control stop"}, nil); err != nil {
		t.Errorf("posting bob's /remote-control stop: %v; want it taken, and refused in the chat", err)
	}
	if got := e.waitOut("local:main", from, 1, time.Minute)[0].Text; !strings.Contains(got, "Only the owner") {
		t.Fatalf("member: got %q; want the owner-only refusal", got)
	}
	if now := processesOf(t, fake); len(now) != 1 || now[0] != pids[0] {
		t.Fatalf("after the member's stop: CLIs %v; want %v still", now, pids)
	}

	// One at a time: the running session's link again.
	if got := e.remoteReply("/remote-control"); got != "Remote control is already running: "+link {
		t.Fatalf("second: got %q; want the running session's link %s", got, link)
	}
	if now := processesOf(t, fake); len(now) != 1 {
		t.Fatalf("after a second command: CLIs %v; want one", now)
	}

	// Stop ends it.
	if got := e.remoteReply("/remote-control stop"); got != "Remote control session ended." {
		t.Fatalf("stop: got %q; want it ended", got)
	}
	// The end is told once the CLI is gone.
	if now := processesOf(t, fake); len(now) != 0 {
		t.Fatalf("after the stop: CLIs %v still run", now)
	}
	if got := e.remoteReply("/remote-control stop"); got != "Remote control is not running." {
		t.Fatalf("stop again: got %q; want none running", got)
	}

	// Its own end is told.
	if got := e.remoteReply("/remote-control"); !remoteLinkRE.MatchString(got) || strings.Contains(got, link) {
		t.Fatalf("restart: got %q; want a new link", got)
	}
	pids = processesOf(t, fake)
	if len(pids) != 1 {
		t.Fatalf("remote control CLIs running: %v; want one", pids)
	}
	from = lastID(e, "local:main")
	if err := syscall.Kill(pids[0], syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := e.waitOut("local:main", from, 1, time.Minute)[0].Text; got != "Remote control session ended: the claude CLI exited." {
		t.Fatalf("its end: got %q; want it told", got)
	}

	// bridged's end ends it too.
	if got := e.remoteReply("/remote-control"); !remoteLinkRE.MatchString(got) {
		t.Fatalf("restart: got %q; want a link", got)
	}
	d.stop(t)
	if now := processesOf(t, fake); len(now) != 0 {
		t.Fatalf("after bridged stopped: CLIs %v still run", now)
	}

	// So does its death: no host-level session is left behind.
	d = e.start()
	if got := e.remoteReply("/remote-control"); !remoteLinkRE.MatchString(got) {
		t.Fatalf("after a restart: got %q; want a link", got)
	}
	d.kill9()
	deadline := time.Now().Add(30 * time.Second)
	for len(processesOf(t, fake)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("30s after bridged was killed: CLIs %v still run", processesOf(t, fake))
		}
		<-time.After(50 * time.Millisecond) // the kernel signals it; nothing tells this test
	}
}
